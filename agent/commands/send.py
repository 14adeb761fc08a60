"""``tts-agent send``: a small controller. Publishes one command, optionally waits for the answer.

The command is validated locally with the agent's own schema; the broker comes from the settings
and ``mosquitto_pub``-like options (a password on the command line is refused). ``--wait`` prints
the final event (:mod:`agent.commands.send_wait`); for ``--group``/``--all`` every expected device
is accounted for (:mod:`agent.commands.send_account`). Exit status 0 succeeded, 1 ended otherwise,
2 bad arguments, 3 no broker or no answer. Usage: docs/cli.md; design:
docs/internals.md#tts-agent-send.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import USAGE, CommandError, add_config_argument, settings_from_args
from agent.commands.send_account import Inbox, await_account
from agent.commands.send_sync import add_options as add_start_options
from agent.commands.send_sync import check_options, choose_start
from agent.commands.send_wait import NO_ANSWER, await_final, succeeded

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent.mqtt.client import InboundMessage, MqttClient
    from agent.mqtt.fleet_view import FleetView
    from agent.mqtt.protocol import SpeakCommand
    from agent.mqtt.topics import Namespace, Topic, TopicFilter
    from agent.settings import MqttSettings

__all__ = ["NO_ANSWER", "add_connection_arguments", "build_payload", "connect",
           "connection_settings", "register", "run", "succeeded"]

MAX_TIMEOUT_S = 86_400.0
MAX_CONNECT_TIMEOUT_S = 600.0
MAX_SETTLE_S = 60.0
MAX_READ_LIMIT_S = 3600.0
PROBES = ("auto", "always", "never")  # agent.mqtt.fleet_view.PROBES, unloaded
PROBE_HELP = ("ping every device and take the answers too: auto (default) when the retained "
              "status and health name no device (a broker that keeps them from wildcard "
              "subscriptions), always, never")
_POLL_S = 0.05
"""Slice of the wait for the connection, between looks at whether the one attempt failed."""

_PROTOCOLS = {"5": "5", "mqttv5": "5", "3.1.1": "3.1.1", "mqttv311": "3.1.1"}
_OPTION_OF = {"host": "-h/--host", "port": "-p/--port", "ca_file": "--cafile",
              "cert_file": "--cert", "key_file": "--key", "username": "-u/--username",
              "password_file": "--password-file", "connect_timeout_s": "--connect-timeout"}


def _option(parser: argparse.ArgumentParser, *names: str, top: bool, default: Any = None,
            **kwargs: Any) -> None:
    """An option accepted before and after the command name (after it, it never overrides
    a value given before: its default is suppressed)."""
    parser.add_argument(*names, default=default if top else argparse.SUPPRESS, **kwargs)


def _connection(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``mosquitto_pub``'s connection options; unset ones keep the settings' value."""
    _option(parser, "-h", "--host", top=top, help="broker host (default: mqtt.host)")
    _option(parser, "-p", "--port", top=top, type=int, help="broker port (default: mqtt.port)")
    _option(parser, "-V", "--protocol-version", top=top, choices=sorted(_PROTOCOLS),
            help="MQTT version (default: mqtt.protocol)")
    _option(parser, "--cafile", top=top, type=Path, metavar="FILE",
            help="CA certificates to verify the broker with; turns TLS on")
    _option(parser, "--tls-use-os-certs", top=top, action="store_true", default=False,
            help="TLS, verifying the broker with the system's CA certificates")
    _option(parser, "--cert", top=top, type=Path, metavar="FILE",
            help="client certificate (mutual TLS; with --key)")
    _option(parser, "--key", top=top, type=Path, metavar="FILE", help="client private key")
    _option(parser, "-u", "--username", top=top, help="user name (default: mqtt.username)")
    _option(parser, "--password-file", top=top, type=Path, metavar="FILE",
            help="file holding the password (default: mqtt.password_file)")
    _option(parser, "-P", "--pw", top=top, metavar="PASSWORD",
            help="refused: a password on the command line is visible to every user "
                 "(use --password-file)")
    _option(parser, "--connect-timeout", top=top, type=float, metavar="S",
            help="seconds for the one connect attempt (default: mqtt.connect_timeout_s, 5)")


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``send``'s connection options, for another controller command (``fleet``)."""
    _connection(parser, top=True)


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Options accepted before and after the command name."""
    parser.add_argument("--help", action="help", default=argparse.SUPPRESS,
                        help="show this help and exit")
    _option(parser, "--wait", top=top, action="store_true", default=False,
            help="wait for the final event and print it")
    _option(parser, "--progress", top=top, action="store_true", default=False,
            help="with --wait, also print the events before it (accepted, started, progress)")
    _option(parser, "--timeout", top=top, type=float, default=30.0,
            help="seconds without any event for the command before giving up (default 30)")
    _option(parser, "--settle", top=top, type=float, default=1.0, metavar="S",
            help="--group/--all --wait: read the retained status until none came for S "
                 "seconds before sending (default 1)")
    _option(parser, "--read-limit", top=top, type=float, default=None, metavar="S",
            help="--group/--all --wait: read the retained status for S seconds at most; a read "
                 "cut off there makes the membership incomplete: exit 3 (default 20 x --settle, "
                 "at least 10)")
    _option(parser, "--probe", top=top, choices=PROBES, default="auto",
            help="--group/--all --wait: " + PROBE_HELP)
    _option(parser, "--online-only", top=top, action="store_true", default=False,
            help="--group/--all --wait: members offline (or unknown) when sent are named but "
                 "do not make the exit status 3 (stopped ones never do)")
    _option(parser, "--id", top=top, dest="request_id", help="request id (default: generated)")
    _connection(parser, top=top)
    if not top:
        add_config_argument(parser)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "send", help="send a command to agents over MQTT", add_help=False)
    add_config_argument(parser)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--device", help="device id")
    target.add_argument("--group", help="group name (devices configured with mqtt.groups)")
    target.add_argument("--all", action="store_true", help="every device of the fleet")
    _common(parser, top=True)
    commands = parser.add_subparsers(dest="send_command", metavar="COMMAND", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=text, add_help=False)

    speak = command("speak", "speak a text")
    speak.add_argument("text")
    speak.add_argument("--voice", help="voice name (default: the device's default voice)")
    speak.add_argument("--priority", choices=["low", "normal", "high", "urgent"])
    speak.add_argument("--volume", type=float, help="this request's volume 0.0-1.0")
    speak.add_argument("--speed", type=float, help="speaking rate, 1.0 = the voice's own")
    speak.add_argument("--chime", metavar="NAME",
                       help="play the device's chime NAME right before the speech; '' = none "
                            "(default: the device's chime for the priority, if any)")
    speak.add_argument("--ssml", action="store_true",
                       help="the text is SSML (default: when it starts with <speak)")
    speak.add_argument("--expires-in", type=float, dest="expires_in_s",
                       help="drop it if not started within this many seconds")
    add_start_options(speak)
    stop = command("stop", "stop the current utterance")
    stop.add_argument("--clear", action="store_true", dest="clear_queue",
                      help="also drop the queued requests")
    volume = command("volume", "set the device volume")
    volume.add_argument("volume", type=float, help="0.0-1.0")
    reload = command("reload", "re-check the models directory now")
    reload.add_argument("--voice", help="only this voice")
    reload.add_argument("--version", help="switch the voice to this staged version")
    ping = command("ping", "ask for a small status")
    for sub in (speak, stop, volume, reload, ping):
        _common(sub, top=False)
    parser.set_defaults(handler=run)


_FIELDS = {
    "speak": ("text", "voice", "priority", "volume", "speed", "chime", "ssml", "expires_in_s",
              "at"),
    "stop": ("clear_queue",),
    "volume": ("volume",),
    "reload": ("voice", "version"),
    "ping": (),
}


def build_payload(args: argparse.Namespace) -> tuple[str, bytes]:
    """The request id and the validated JSON payload of the command in ``args``."""
    from pydantic import ValidationError

    from agent.mqtt.protocol import COMMANDS, SpeakCommand, new_request_id

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
        raise CommandError(f"invalid {name} command: {problems}", status=USAGE) from exc
    if isinstance(command, SpeakCommand):
        _check_ssml(command)
    return request_id, command.model_dump_json(exclude_none=True).encode("utf-8")


def _check_ssml(command: SpeakCommand) -> None:
    """Refuse SSML the agent would reject (its voices and chimes are checked there)."""
    from agent.text.ssml import SsmlError, looks_like_ssml, parse_ssml

    ssml = command.ssml if command.ssml is not None else looks_like_ssml(command.text)
    if ssml:
        try:
            document = parse_ssml(command.text, max_chars=len(command.text))
        except SsmlError as exc:
            raise CommandError(f"invalid speak command: {exc}", status=USAGE) from exc
        for warning in document.warnings:  # the agent speaks it and names these in `started`
            print(f"tts-agent send: warning: SSML: {warning}", file=sys.stderr)


def _seconds(value: float, option: str, high: float) -> float:
    """``value`` when it is a number of seconds in (0, high]; a usage error otherwise."""
    if not (math.isfinite(value) and 0 < value <= high):
        raise CommandError(f"{option} must be more than 0 and at most {high:g} seconds "
                           f"(got {value:g})", status=USAGE)
    return value


def connection_settings(args: argparse.Namespace, base: MqttSettings) -> MqttSettings:
    """``base`` with the connection options given on the command line (validated)."""
    from pydantic import ValidationError

    from agent.settings import MqttSettings

    if getattr(args, "pw", None) is not None:
        raise CommandError("-P/--pw is refused: a password on the command line can be read by "
                           "every user of this machine; put it in a file (mode 0600) and "
                           "pass --password-file FILE", status=USAGE)
    updates: dict[str, Any] = {}
    for option, key in (("host", "host"), ("port", "port"), ("username", "username"),
                        ("connect_timeout", "connect_timeout_s")):
        if getattr(args, option, None) is not None:
            updates[key] = getattr(args, option)
    if not 1 <= updates.get("port", 1) <= 65535:
        raise CommandError(f"-p/--port must be 1-65535 (got {args.port})", status=USAGE)
    if getattr(args, "protocol_version", None) is not None:
        updates["protocol"] = _PROTOCOLS[args.protocol_version]
    for option, key in (("cafile", "ca_file"), ("cert", "cert_file"), ("key", "key_file"),
                        ("password_file", "password_file")):
        path: Path | None = getattr(args, option, None)
        if path is not None:  # a file named on the command line is relative to here
            updates[key] = path.expanduser().absolute()
    if "password_file" in updates:
        updates["password"] = None  # the file replaces a password from the settings
    if updates.keys() & {"ca_file", "cert_file", "key_file"} or getattr(
            args, "tls_use_os_certs", False):
        updates["tls"] = True
    if not updates:
        return base
    try:
        return MqttSettings.model_validate({**base.model_dump(), **updates})
    except ValidationError as exc:
        problems = "; ".join(
            f"{_OPTION_OF.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else ''}"
            f"{': ' if e['loc'] else ''}{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors())
        raise CommandError(f"invalid connection option: {problems}", status=USAGE) from exc


def run(args: argparse.Namespace) -> int:
    from agent.logs import configure_logging
    from agent.mqtt.client import ClientConfigError, MqttClient, OutboundMessage
    from agent.mqtt.fleet_view import read_fleet
    from agent.mqtt.topics import Namespace

    settings = settings_from_args(args, configure_logs=False)
    # stdout carries the JSON answers, stderr the one error line: a failed connection is told
    # there (with its hint), so the client's own log lines about it are not printed.
    configure_logging("critical", settings.log.format)
    timeout = _seconds(args.timeout, "--timeout", MAX_TIMEOUT_S)
    settle = _seconds(args.settle, "--settle", MAX_SETTLE_S)
    longest = None if args.read_limit is None else _seconds(
        args.read_limit, "--read-limit", MAX_READ_LIMIT_S)
    if getattr(args, "connect_timeout", None) is not None:
        _seconds(args.connect_timeout, "--connect-timeout", MAX_CONNECT_TIMEOUT_S)
    mqtt = connection_settings(args, settings.mqtt)
    check_options(args)
    request_id, payload = build_payload(args)
    namespace = Namespace(mqtt.topic_prefix)
    client_id = f"tts-send-{secrets.token_hex(6)}"
    target, events = _target(args, namespace)
    mqtt5 = mqtt.protocol == "5"
    reply: Topic | None = namespace.reply(client_id) if (args.wait and mqtt5) else None
    # With --wait the events topic is followed too: progress events show the agent is alive.
    filters = [f for f in (reply.as_filter() if reply else None, events if args.wait else None)
               if f]
    inbox = Inbox(maxsize=10_000)
    view = (None if args.device or not (args.wait or getattr(args, "sync", False))
            else _view(namespace, settings.health.interval_s))
    if view is not None:  # the account: membership from the retained status and health
        filters.extend(view.filters())
    try:
        client = MqttClient(mqtt, client_id, subscriptions=filters,
                            on_message=_router(view, inbox), persistent=False)
    except ClientConfigError as exc:
        raise CommandError(str(exc), status=USAGE) from exc
    try:
        connect(client, mqtt)
        if view is not None:
            read_fleet(client, view, settle, _probe(args), longest)
        for line in choose_start(args, view):
            request_id, payload = build_payload(args)
            print(f"tts-agent send: {line}", file=sys.stderr, flush=True)
        correlation = secrets.token_bytes(16) if reply is not None else None
        sent = client.publish(OutboundMessage(target, payload, response_topic=reply,
                                              correlation_data=correlation))
        if sent.dropped or not sent.wait(timeout):
            raise CommandError("the broker did not acknowledge the command", status=NO_ANSWER)
        if not args.wait:
            print(json.dumps({"id": request_id, "topic": target.value}))
            return 0
        if view is not None:
            return await_account(inbox, request_id, timeout, reply=reply,
                                 correlation=correlation, progress=args.progress, view=view,
                                 group=args.group, online_only=args.online_only)
        return await_final(inbox, request_id, timeout, reply=reply, correlation=correlation,
                           single=True, progress=args.progress)
    finally:
        client.close(timeout=2)


def _probe(args: argparse.Namespace) -> str:
    """When the fleet is pinged: always for ``--sync`` (the pongs tell the members' clocks,
    :mod:`agent.mqtt.clock_offset`), else as ``--probe`` says."""
    return "always" if getattr(args, "sync", False) else str(args.probe)


def _target(args: argparse.Namespace, namespace: Namespace) -> tuple[Topic, TopicFilter]:
    """The command topic for ``--device``/``--group``/``--all``, and the events filter."""
    from agent.mqtt.topics import TopicError

    try:
        if args.device:
            device = namespace.device(args.device)
            return device.command(args.send_command), device.events.as_filter()
        if args.group:
            return namespace.group_command(args.group, args.send_command), namespace.all_events()
        return namespace.fleet_command(args.send_command), namespace.all_events()
    except TopicError as exc:
        raise CommandError(str(exc), status=USAGE) from exc


def _view(namespace: Namespace, interval_s: float) -> FleetView:
    from agent.mqtt.fleet_view import FleetView

    return FleetView(namespace, default_interval_s=interval_s)


def _router(view: FleetView | None, inbox: Inbox) -> Callable[[InboundMessage], None]:
    """Network thread: presence and health to the view (bounded), the rest to the inbox."""
    def route(message: InboundMessage) -> None:
        if view is None or not view.offer(message):
            inbox.offer(message)
    return route


def connect(client: MqttClient, mqtt: MqttSettings) -> None:
    """Start ``client`` and wait for its first connection: one attempt, given up when it fails
    (refused, TLS, credentials) or after ``mqtt.connect_timeout_s`` without a CONNACK."""
    where = f"{mqtt.host}:{mqtt.port}"
    deadline = time.monotonic() + mqtt.connect_timeout_s
    client.start()
    while not client.wait_ready(_POLL_S):
        error = client.last_error  # set by a failed attempt only (a fresh client has none)
        if error is not None:
            raise CommandError(f"cannot reach the broker {where}: {error}{_hint(error)}",
                               status=NO_ANSWER)
        if time.monotonic() >= deadline:
            raise CommandError(f"cannot reach the broker {where}: no answer within "
                               f"{mqtt.connect_timeout_s:g} s (--connect-timeout)",
                               status=NO_ANSWER)


_HINTS = (
    (("connectionrefused",), "is a broker listening there? give it with -h HOST -p PORT"),
    (("timeout", "timed out"), "no answer: check -h, -p and firewalls"),
    (("gaierror", "name or service", "name resolution"), "cannot resolve the host: check -h"),
    (("not authorized", "user name or password"), "check -u USER and --password-file FILE"),
    (("protocol version",), "the broker speaks another MQTT version: try -V 3.1.1"),
    (("before connack",), "a broker without MQTT 5 needs -V 3.1.1; a TLS port needs --cafile "
                          "FILE; a broker that asks for a client certificate needs --cert FILE "
                          "--key FILE"),
    (("certificate", "ssl", "tls"), "check --cafile, --cert/--key, and that -h names the "
                                    "broker as its certificate does"),
)


def _hint(error: str) -> str:
    """What to check, for the one-line error of a failed connect."""
    text = error.lower()
    return next((f"; {hint}" for keys, hint in _HINTS if any(k in text for k in keys)), "")
