"""``tts-agent fleet forget ID [ID ...]``: retire devices, clearing their retained messages.

A device taken out of the fleet keeps its retained presence and health on the broker, so
``fleet`` lists it and group sends name it. ``forget`` reads each device's two retained topics
(``{prefix}/{id}/status``, ``{prefix}/{id}/health``: exact subscriptions, which every broker
answers), refuses a device whose presence says ``online`` (a running agent would publish them
again), then publishes an empty retained message on each and prints what it cleared. A helper of
:mod:`agent.commands.fleet`, no sub-command of its own. Usage: docs/fleet.md#retiring-a-device.
"""

from __future__ import annotations

import json
import secrets
import threading
from typing import TYPE_CHECKING, Any

from agent import jsonbound
from agent.commands import FAILED, NO_ANSWER, USAGE, CommandError, shown

if TYPE_CHECKING:
    from agent.mqtt.client import InboundMessage
    from agent.mqtt.topics import Topic
    from agent.settings import MqttSettings

__all__ = ["MAX_IDS", "forget", "register"]

MAX_IDS = 1000
"""Devices one ``forget`` takes at most."""
_ACK_S = 10.0
_MAX_PRESENCE_BYTES = 128 * 1024


def register(subparsers: Any) -> None:
    """Nothing to register: ``fleet`` (:mod:`agent.commands.fleet`) owns the sub-command."""


def _topics(prefix: str, ids: list[str]) -> dict[str, tuple[Topic, Topic]]:
    """Each device's status and health topics; a bad id is exit 2 (the device id's rules)."""
    import re

    from agent.mqtt.topics import Namespace, TopicError
    from agent.settings.base import NAME_PATTERN

    if len(ids) > MAX_IDS:
        raise CommandError(f"fleet forget takes at most {MAX_IDS} device ids (got {len(ids)})",
                           status=USAGE)
    namespace, topics = Namespace(prefix), {}
    for device in ids:
        try:
            if not re.fullmatch(NAME_PATTERN, device):
                raise TopicError(f"device id {shown(device)!r} is not a device id (letters, "
                                 "digits, '.', '_', '-', at most 64, first a letter or digit)")
            own = namespace.device(device)
        except TopicError as exc:
            raise CommandError(str(exc), status=USAGE) from None
        topics[device] = (own.status, own.health)
    return topics


def _presence(payload: bytes) -> str:
    """A retained presence's ``state`` in words (``?``: not the agent's JSON)."""
    try:
        data = jsonbound.loads(payload, max_bytes=_MAX_PRESENCE_BYTES)
    except jsonbound.JsonError:
        return "?"
    state = data.get("state") if isinstance(data, dict) else None
    return state if isinstance(state, str) else "?"


def forget(mqtt: MqttSettings, ids: list[str], settle: float, *, as_json: bool) -> int:
    """Read, check and clear the retained topics of ``ids``; print what was cleared (one line a
    device, or one JSON document). Exit 0; 1 a device is online (nothing cleared); 3 no
    broker, or the broker did not acknowledge a clear."""
    from agent.commands.send import connect
    from agent.mqtt.client import ClientConfigError, MqttClient, OutboundMessage
    from agent.mqtt.topics import TopicFilter

    topics = _topics(mqtt.topic_prefix, ids)
    held: dict[Topic, bytes] = {}
    lock = threading.Lock()

    def keep(message: InboundMessage) -> None:
        with lock:
            if message.payload:
                held[message.topic] = message.payload
            else:
                held.pop(message.topic, None)

    filters = [TopicFilter(t.value) for pair in topics.values() for t in pair]
    try:
        client = MqttClient(mqtt, f"tts-fleet-forget-{secrets.token_hex(6)}",
                            subscriptions=filters, on_message=keep, persistent=False)
    except ClientConfigError as exc:
        raise CommandError(str(exc), status=USAGE) from exc
    try:
        connect(client, mqtt)
        threading.Event().wait(settle)  # the retained messages come right after SUBSCRIBE
        with lock:
            found = dict(held)
        running = [d for d, (status, _) in topics.items()
                   if status in found and _presence(found[status]) == "online"]
        if running:
            raise CommandError(f"not forgotten: {', '.join(shown(d) for d in running)} "
                               "online (a running agent publishes its status and health again: "
                               "stop it first); nothing was cleared", status=FAILED)
        for pair in topics.values():
            for topic in pair:
                if not client.publish(OutboundMessage(topic, b"", retain=True)).wait(_ACK_S):
                    raise CommandError(f"the broker did not acknowledge the clear of "
                                       f"{topic.value}", status=NO_ANSWER)
    finally:
        client.close(timeout=2)
    _report(topics, found, as_json)
    return 0


def _report(topics: dict[str, tuple[Topic, Topic]], found: dict[Topic, bytes],
            as_json: bool) -> None:
    rows = []
    for device, (status, health) in topics.items():
        cleared = [t.value for t in (status, health) if t in found]
        state = _presence(found[status]) if status in found else None
        rows.append({"device": device, "cleared": cleared, "status_was": state})
        if not as_json:
            what = (", ".join(f"{t} ({state})" if t == status.value and state else t
                              for t in cleared) if cleared else "nothing was retained")
            print(shown(f"forgot {device}: {what}"), flush=True)
    if as_json:
        print(json.dumps({"forgot": rows}), flush=True)
