"""Home Assistant MQTT discovery: the one device-based discovery message that makes the agent
appear in Home Assistant, and how a message from its notify entity becomes a speak request.

:func:`discovery_payload` builds the retained ``{ha_prefix}/device/{node}/config`` message (the
device, the origin and one component per entity: speak, volume, stop, sensors, problem);
:func:`notify_request` turns a notify message (plain text, or a JSON ``speak`` command; a JSON
array is refused) into a speak request. For users: docs/home-assistant.md; the entities:
docs/internals.md#the-home-assistant-discovery-message.
"""

from __future__ import annotations

import json
from typing import Any

from agent import jsonbound
from agent.mqtt.client import InboundMessage
from agent.mqtt.intake import RETAINED_REASON, Request
from agent.mqtt.protocol import CommandRejected, describe_json_error, parse_command
from agent.mqtt.publisher import ReplyRoute
from agent.mqtt.topics import DeviceTopics, Namespace, group_object_id

__all__ = ["MAX_CONFIG_BYTES", "ORIGIN", "DiscoveryInfo", "discovery_payload",
           "group_payload",
           "notify_request", "unique_id"]

ORIGIN = "tts-agent"
"""The origin's name in the ``o`` block (and the prefix of every unique id)."""
MAX_CONFIG_BYTES = 16 * 1024
"""Bound on the discovery message: well under the broker limits in common use."""

_AVAILABILITY = "{{ 'online' if value_json.state == 'online' else 'offline' }}"
_PROBLEM = "{{ 'OFF' if value_json.state == 'ok' else 'ON' }}"
_REASONS = "{{ {'reasons': value_json.reasons} | tojson }}"
_VOLUME_COMMAND = '{"volume": {{ value / 100 }}}'
_VOLUME_STATE = "{{ (value_json.audio.volume * 100) | round(0) }}"


def _path(path: str) -> str:
    return "{{ value_json." + path + " }}"


def unique_id(device_id: str, key: str) -> str:
    """The unique id of one entity: the device id and the entity's key, nothing that changes."""
    return f"{ORIGIN}-{device_id}-{key}"


class DiscoveryInfo:
    """What the message says about the device (the ``dev`` and ``o`` blocks)."""

    def __init__(self, *, device_id: str, name: str | None, version: str,
                 hardware: str | None) -> None:
        self.device_id = device_id
        self.name = name or device_id
        self.version = version
        self.hardware = hardware

    def device(self) -> dict[str, Any]:
        block: dict[str, Any] = {"name": self.name, "identifiers": [f"{ORIGIN}-{self.device_id}"],
                                 "manufacturer": "edge-tts-agent", "model": "TTS agent",
                                 "sw_version": self.version}
        if self.hardware:
            block["hw_version"] = self.hardware[:128]
        return block


def _components(info: DiscoveryInfo, topics: DeviceTopics) -> dict[str, dict[str, Any]]:
    health = topics.health.value

    def sensor(name: str, template: str, **extra: Any) -> dict[str, Any]:
        return {"p": "sensor", "name": name, "state_topic": health, "value_template": template,
                **extra}

    components: dict[str, dict[str, Any]] = {
        "speak": {"p": "notify", "name": "Speak", "command_topic": topics.ha_notify.value,
                  "qos": 1, "retain": False},
        "volume": {"p": "number", "name": "Volume", "command_topic":
                   topics.command("volume").value, "command_template": _VOLUME_COMMAND,
                   "state_topic": health, "value_template": _VOLUME_STATE, "min": 0,
                   "max": 100, "step": 1, "unit_of_measurement": "%", "mode": "slider",
                   "qos": 1, "retain": False},
        "stop": {"p": "button", "name": "Stop", "command_topic": topics.command("stop").value,
                 "payload_press": "{}", "qos": 1, "retain": False},
        "stop_all": {"p": "button", "name": "Stop and clear queue",
                     "command_topic": topics.command("stop").value,
                     "payload_press": json.dumps({"clear_queue": True}), "qos": 1,
                     "retain": False},
        "state": sensor("State", _path("state"), device_class="enum",
                        options=["ok", "degraded", "failing"], entity_category="diagnostic"),
        "queue": sensor("Queue", _path("queue.pending"), state_class="measurement",
                        unit_of_measurement="requests"),
        "last_synthesis": sensor("Last synthesis time", _path("requests.last_synthesis_s"),
                                 device_class="duration", unit_of_measurement="s",
                                 state_class="measurement", suggested_display_precision=2),
        "voice": sensor("Voice", _path("voices.default")),
        "version": sensor("Version", _path("version"), entity_category="diagnostic"),
        "problem": {"p": "binary_sensor", "name": "Problem", "device_class": "problem",
                    "state_topic": health, "value_template": _PROBLEM,
                    "json_attributes_topic": health, "json_attributes_template": _REASONS,
                    "entity_category": "diagnostic"},
    }
    for key, component in components.items():
        component["unique_id"] = unique_id(info.device_id, key)
    return components


def discovery_payload(info: DiscoveryInfo, topics: DeviceTopics) -> bytes:
    """The retained discovery message for the device (JSON, at most :data:`MAX_CONFIG_BYTES`)."""
    message = {
        "dev": info.device(),
        "o": {"name": ORIGIN, "sw_version": info.version},
        "cmps": _components(info, topics),
        "availability": [{"topic": topics.status.value, "value_template": _AVAILABILITY,
                          "payload_available": "online", "payload_not_available": "offline"}],
    }
    payload = json.dumps(message, separators=(",", ":")).encode()
    if len(payload) > MAX_CONFIG_BYTES:  # only a far longer device id or name could do this
        raise ValueError(f"discovery message is {len(payload)} bytes, over {MAX_CONFIG_BYTES}")
    return payload


def group_payload(namespace: Namespace, group: str, *, lead_s: float, priority: str) -> bytes:
    """The retained single-component message of ``group``'s notify entity: the same bytes from
    every member (nothing of the device in it), so Home Assistant sees one entity. Its
    ``command_template`` makes a synchronized speak starting ``lead_s`` after Home Assistant
    renders it (``now()``, an aware datetime)."""
    lead_ms = round(lead_s * 1000)
    template = ('{"text": {{ value | tojson }}, "priority": ' + json.dumps(priority)
                + ', "at": {{ (now().timestamp() * 1000) | int + ' + str(lead_ms) + ' }} }')
    object_id = group_object_id(group)
    message = {"name": f"Speak (group {group})", "unique_id": f"{object_id}-speak",
               "command_topic": namespace.group_command(group, "speak").value,
               "command_template": template, "qos": 1, "retain": False,
               "o": {"name": ORIGIN}}
    payload = json.dumps(message, separators=(",", ":")).encode()
    if len(payload) > MAX_CONFIG_BYTES:  # cannot happen with validated group names
        raise ValueError(f"group discovery message is {len(payload)} bytes")
    return payload


def _refuse_array(payload: bytes, max_bytes: int) -> None:
    """Raise :class:`CommandRejected` for a payload that is JSON nested too deeply or a JSON
    array (bounded: :mod:`agent.jsonbound`); return for text that only starts with ``[``."""
    try:
        jsonbound.loads(payload, max_bytes=max_bytes)
    except jsonbound.TooDeep as exc:
        raise CommandRejected(describe_json_error(str(exc)), command="speak") from None
    except jsonbound.JsonError:
        return  # not JSON: plain text
    raise CommandRejected("a JSON array is not a notify message: send plain text, or a JSON "
                          "object (a speak command)", command="speak")


def notify_request(message: InboundMessage, *, priority: str, max_payload_bytes: int,
                   max_text_chars: int, reply: ReplyRoute | None = None) -> Request:
    """A speak request from a message on the notify topic; raises :class:`CommandRejected`.

    Plain text is spoken with ``priority``; a payload that starts with ``{`` is read as a
    ``speak`` command. A JSON array, and JSON nested too deeply, are refused (not read
    aloud); text that only starts with ``[`` ("[Alarm] door open") is plain text. Retained
    messages are refused like retained commands, and so is a payload over
    ``max_payload_bytes`` or text over ``max_text_chars``. ``reply``: the message's Response
    Topic (:meth:`agent.mqtt.intake.Intake.reply_route`), answered there too.
    """
    payload = message.payload
    if message.retain:
        raise CommandRejected(RETAINED_REASON, command="speak")
    if len(payload) > max_payload_bytes:
        raise CommandRejected(f"payload too large: {len(payload)} bytes, limit "
                              f"{max_payload_bytes}", command="speak")
    if payload.lstrip()[:1] == b"[":
        _refuse_array(payload, max_payload_bytes)
    if payload.lstrip()[:1] != b"{":
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CommandRejected(f"payload is not UTF-8: {exc.reason}",
                                  command="speak") from None
        if not text.strip():
            raise CommandRejected("text is empty", command="speak")
        payload = json.dumps({"text": text, "priority": priority}).encode()
    command = parse_command("speak", payload, max_payload_bytes=max(len(payload),
                                                                    max_payload_bytes),
                            max_text_chars=max_text_chars)
    deadline = None if message.expiry_s is None else message.received + message.expiry_s
    return Request(command, "speak", None, reply, None, deadline, message.received)
