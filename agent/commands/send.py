"""``tts-agent send``: a small controller. Publishes one command, optionally waits for the answer.

    tts-agent send --device kiosk-1 speak "Doors closing" --priority urgent --wait
    tts-agent send --group lobby volume 0.4
    tts-agent send --all ping --wait --timeout 3

The command is validated locally with the same schema the agent uses, so a typo fails here.
With ``--wait`` the final event is printed as one JSON line: over MQTT 5 it arrives on a private
Response Topic with Correlation Data; over 3.1.1 it is picked from the events topic by id.
``--progress`` also prints the events before it (accepted, started).

Exit status: 0 the command succeeded (or was sent, without ``--wait``); 1 it ended otherwise
(rejected, failed, expired, interrupted); 3 no broker or no answer within ``--timeout``. An id
the agent already served is answered with a final ``duplicate`` event, printed like any other;
the exit status is then that of the original outcome it names (``outcome``).
"""

from __future__ import annotations

import argparse
import json
import queue
import secrets
import time
from typing import TYPE_CHECKING, Any

from agent.commands import CommandError, add_config_argument, settings_from_args

if TYPE_CHECKING:
    from agent.mqtt.client import InboundMessage
    from agent.mqtt.topics import Topic, TopicFilter

SUCCESS_EVENTS = frozenset({"finished", "done", "pong"})
NO_ANSWER = 3


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Options accepted before and after the command name."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    parser.add_argument("--wait", action="store_true", default=default(False),
                        help="wait for the final event and print it")
    parser.add_argument("--progress", action="store_true", default=default(False),
                        help="with --wait, also print accepted/started events")
    parser.add_argument("--timeout", type=float, default=default(30.0),
                        help="seconds to wait for the broker and the answer (default 30)")
    parser.add_argument("--id", dest="request_id", default=default(None),
                        help="request id (default: generated)")
    if not top:
        add_config_argument(parser)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("send", help="send a command to agents over MQTT")
    add_config_argument(parser)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--device", help="device id")
    target.add_argument("--group", help="group name (devices configured with mqtt.groups)")
    target.add_argument("--all", action="store_true", help="every device of the fleet")
    _common(parser, top=True)
    commands = parser.add_subparsers(dest="send_command", metavar="COMMAND", required=True)

    speak = commands.add_parser("speak", help="speak a text")
    speak.add_argument("text")
    speak.add_argument("--voice", help="voice name (default: the device's default voice)")
    speak.add_argument("--priority", choices=["low", "normal", "high", "urgent"])
    speak.add_argument("--volume", type=float, help="this request's volume 0.0-1.0")
    speak.add_argument("--speed", type=float, help="speaking rate, 1.0 = the voice's own")
    speak.add_argument("--expires-in", type=float, dest="expires_in_s",
                       help="drop it if not started within this many seconds")
    stop = commands.add_parser("stop", help="stop the current utterance")
    stop.add_argument("--clear", action="store_true", dest="clear_queue",
                      help="also drop the queued requests")
    volume = commands.add_parser("volume", help="set the device volume")
    volume.add_argument("volume", type=float, help="0.0-1.0")
    reload = commands.add_parser("reload", help="re-check the models directory now")
    reload.add_argument("--voice", help="only this voice")
    reload.add_argument("--version", help="switch the voice to this staged version")
    ping = commands.add_parser("ping", help="ask for a small status")
    for sub in (speak, stop, volume, reload, ping):
        _common(sub, top=False)
    parser.set_defaults(handler=run)


_FIELDS = {
    "speak": ("text", "voice", "priority", "volume", "speed", "expires_in_s"),
    "stop": ("clear_queue",),
    "volume": ("volume",),
    "reload": ("voice", "version"),
    "ping": (),
}


def build_payload(args: argparse.Namespace) -> tuple[str, bytes]:
    """The request id and the validated JSON payload of the command in ``args``."""
    from pydantic import ValidationError

    from agent.mqtt.protocol import COMMANDS, new_request_id

    name: str = args.send_command
    request_id = args.request_id or new_request_id()
    values = {"id": request_id}
    for field in _FIELDS[name]:
        value = getattr(args, field, None)
        if value is not None and value is not False:
            values[field] = value
    try:
        command = COMMANDS[name].model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CommandError(f"invalid {name} command: {problems}", status=2) from exc
    return request_id, command.model_dump_json(exclude_none=True).encode("utf-8")


def run(args: argparse.Namespace) -> int:
    from agent.logs import configure_logging
    from agent.mqtt.client import ClientConfigError, MqttClient, OutboundMessage
    from agent.mqtt.topics import Namespace, TopicError

    settings = settings_from_args(args, configure_logs=False)
    configure_logging("error", settings.log.format)  # stdout carries the JSON answers
    request_id, payload = build_payload(args)
    namespace = Namespace(settings.mqtt.topic_prefix)
    client_id = f"tts-send-{secrets.token_hex(6)}"
    try:
        if args.device:
            target = namespace.device(args.device).command(args.send_command)
            events: TopicFilter = namespace.device(args.device).events.as_filter()
        elif args.group:
            target = namespace.group_command(args.group, args.send_command)
            events = namespace.all_events()
        else:
            target = namespace.fleet_command(args.send_command)
            events = namespace.all_events()
    except TopicError as exc:
        raise CommandError(str(exc), status=2) from exc
    mqtt5 = settings.mqtt.protocol == "5"
    reply: Topic | None = namespace.reply(client_id) if (args.wait and mqtt5) else None
    filters = [f for f in (reply.as_filter() if reply else None,
                           events if args.wait and (args.progress or not mqtt5) else None) if f]
    inbox: queue.Queue[InboundMessage] = queue.Queue(maxsize=10_000)
    try:
        client = MqttClient(settings.mqtt, client_id, subscriptions=filters,
                            on_message=inbox.put_nowait, persistent=False)
    except ClientConfigError as exc:
        raise CommandError(str(exc), status=2) from exc
    deadline = time.monotonic() + args.timeout
    client.start()
    try:
        if not client.wait_ready(args.timeout):
            raise CommandError(f"cannot reach the broker {settings.mqtt.host}:"
                               f"{settings.mqtt.port}: {client.last_error or 'timed out'}",
                               status=NO_ANSWER)
        correlation = secrets.token_bytes(16) if reply is not None else None
        sent = client.publish(OutboundMessage(target, payload, response_topic=reply,
                                              correlation_data=correlation))
        if not sent.wait(max(0.1, deadline - time.monotonic())):
            raise CommandError("the broker did not acknowledge the command", status=NO_ANSWER)
        if not args.wait:
            print(json.dumps({"id": request_id, "topic": target.value}))
            return 0
        return _await(inbox, request_id, deadline, reply=reply, correlation=correlation,
                      single=bool(args.device), progress=args.progress)
    finally:
        client.close(timeout=2)


def _await(inbox: queue.Queue[InboundMessage], request_id: str, deadline: float, *,
           reply: Topic | None, correlation: bytes | None, single: bool,
           progress: bool) -> int:
    """Print events for ``request_id`` until the final one (one device) or the deadline."""
    finals: list[dict[str, Any]] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            message = inbox.get(timeout=remaining)
        except queue.Empty:
            break
        try:
            event = json.loads(message.payload)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("id") != request_id:
            continue
        on_reply = reply is not None and message.topic == reply
        if on_reply and message.correlation_data != correlation:
            continue
        is_final = bool(event.get("final"))
        if is_final and reply is not None and not on_reply:
            continue  # the final event is taken from the reply topic (MQTT 5)
        if is_final or progress:
            print(json.dumps(event), flush=True)
        if is_final:
            finals.append(event)
            if single:
                break
    if not finals:
        raise CommandError(f"no answer to {request_id} within the timeout", status=NO_ANSWER)
    return 0 if all(succeeded(e) for e in finals) else 1


def succeeded(event: dict[str, Any]) -> bool:
    """Whether a final event means success; a ``duplicate`` by the outcome it names."""
    kind = event.get("outcome") if event.get("event") == "duplicate" else event.get("event")
    return kind in SUCCESS_EVENTS
