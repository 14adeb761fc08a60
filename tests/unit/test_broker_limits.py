"""Every topic the agent publishes or subscribes to, and its largest messages, against the
tightest common broker limits (AWS IoT Core: 7 slashes and 256 bytes in a topic, 8 filters per
SUBSCRIBE, 128 KB payloads). The values are the longest the settings allow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.mqtt import limits
from agent.mqtt.client import MqttClient, OutboundMessage
from agent.mqtt.intake import Intake
from agent.mqtt.protocol import COMMANDS
from agent.mqtt.topics import (
    HERMES_ERROR,
    HERMES_SAY,
    HERMES_SAY_FINISHED,
    DiscoveryTopics,
    Namespace,
    Topic,
    TopicFilter,
)
from agent.settings import MqttSettings, Settings

LONG_LEVEL = "a" * 63


def longest_prefix() -> str:
    """The deepest and longest topic prefix the settings accept."""
    levels: list[str] = []
    while True:
        candidate = "/".join([*levels, "p"])
        try:
            MqttSettings(topic_prefix=candidate)
        except ValidationError:
            break
        levels.append("p")
        assert len(levels) < 40, "topic_prefix depth is not bounded"
    prefix = "/".join(levels)
    return prefix + "p" * (64 - len(prefix))


def longest_name(field: str) -> str:
    """The longest device id or group name the settings accept."""
    name = "d"
    while len(name) < 10_000:
        longer = name * 2
        try:
            if field == "device_id":
                Settings(device_id=longer)
            else:
                MqttSettings(groups=[longer])
        except ValidationError:
            break
        name = longer
    while True:
        try:
            Settings(device_id=name + "d") if field == "device_id" else MqttSettings(
                groups=[name + "d"])
        except ValidationError:
            return name
        name += "d"
        assert len(name) < 10_000, f"{field} length is not bounded"


def every_topic() -> tuple[list[Topic], list[TopicFilter]]:
    """What the agent and its controller commands publish to and subscribe to."""
    namespace = Namespace(longest_prefix())
    device = longest_name("device_id")
    group = longest_name("group")
    topics = namespace.device(device)
    groups = tuple(f"{group[:-2]}{i:02d}" for i in range(MqttSettings.model_fields[
        "groups"].metadata[0].max_length))
    published = [topics.events, topics.status, topics.health, HERMES_SAY_FINISHED, HERMES_ERROR,
                 namespace.reply("tts-send-" + "f" * 12)]
    for name in COMMANDS:
        published += [topics.command(name), namespace.group_command(group, name),
                      namespace.fleet_command(name)]
    ha = DiscoveryTopics(longest_prefix().replace("p", "h"), device)
    published += [ha.config, ha.birth, topics.ha_notify]
    filters = [*Intake.subscriptions(topics, groups, hermes=True), HERMES_SAY.as_filter(),
               ha.birth.as_filter(), topics.ha_notify.as_filter(), namespace.all_events(),
               namespace.reply_space()]
    return published, filters


def test_every_topic_keeps_within_seven_slashes_and_256_bytes() -> None:
    published, filters = every_topic()
    for value in [t.value for t in published] + [f.value for f in filters]:
        assert value.count("/") <= limits.MAX_TOPIC_SLASHES, value
        assert len(value.encode()) <= limits.MAX_TOPIC_BYTES, value
        assert not value.startswith("$share/")


def test_a_prefix_too_deep_for_the_deepest_topic_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="7 slashes"):
        MqttSettings(topic_prefix="a/b/c/d/e")
    with pytest.raises(ValidationError, match="7 slashes"):
        MqttSettings(ha_prefix="a/b/c/d/e/f")
    with pytest.raises(ValidationError, match="64"):
        MqttSettings(groups=["g" * 65])


class _Paho:
    """Stands in for paho's client to count SUBSCRIBE packets (wiring only)."""

    def __init__(self) -> None:
        self.packets: list[list[Any]] = []

    def subscribe(self, items: list[Any]) -> tuple[Any, int]:
        from paho.mqtt.enums import MQTTErrorCode
        self.packets.append(items)
        return MQTTErrorCode.MQTT_ERR_SUCCESS, len(self.packets)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_subscriptions_go_in_subscribes_of_at_most_eight_filters(protocol: str) -> None:
    _, filters = every_topic()
    assert len(filters) > limits.MAX_FILTERS_PER_SUBSCRIBE
    client = MqttClient(MqttSettings(protocol=protocol), "c", subscriptions=filters)
    fake = _Paho()
    client._paho = fake  # type: ignore[assignment]
    client._subscribe_all()
    assert [len(p) for p in fake.packets] and max(
        len(p) for p in fake.packets) <= limits.MAX_FILTERS_PER_SUBSCRIBE
    sent = [item[0] for packet in fake.packets for item in packet]
    assert sent == [f.value for f in filters]


def big_report(voices: int) -> dict[str, Any]:
    loaded = [{"voice": f"voice-{i:04d}-" + "x" * 40, "version": "1.0.0", "variant": "int8",
               "sha256": "0" * 64, "loaded_at": 0.0, "provider": "CPUExecutionProvider",
               "sample_rate": 22050, "streaming": None, "session_cache": "hit",
               "signed_by": None, "text_rules": "en", "problems": ["stale variant " + "y" * 100]}
              for i in range(voices)]
    return {"schema": 1, "state": "ok", "reasons": [], "device_id": "d1", "version": "1",
            "time": "2026-01-01T00:00:00Z", "uptime_s": 1.0, "requests": {"total": 1},
            "voices": {"voices": loaded, "default": "voice-0000", "last_reload": {}},
            "mqtt": {"connected": True, "groups": ["lobby"]}}


def test_a_health_report_with_many_voices_is_shrunk_under_the_payload_limit() -> None:
    report = big_report(2000)
    assert len(json.dumps(report)) > limits.MAX_PAYLOAD_BYTES
    payload = limits.fit_report(report)
    assert len(payload) <= limits.MAX_PAYLOAD_BYTES
    shrunk = json.loads(payload)
    assert shrunk["mqtt"] == report["mqtt"] and shrunk["state"] == "ok"
    assert "omitted" in shrunk["voices"]
    assert any("voices" in reason and "omitted" in reason for reason in shrunk["reasons"])
    small = big_report(3)
    assert json.loads(limits.fit_report(small)) == small


def test_the_client_refuses_to_send_a_payload_over_the_limit(tmp_path: Path) -> None:
    client = MqttClient(MqttSettings(), "c")
    too_big = OutboundMessage(Topic("tts/d/events"), b"x" * (limits.MAX_PAYLOAD_BYTES + 1))
    assert client.publish(too_big).dropped
    assert not client.publish(OutboundMessage(Topic("tts/d/events"), b"{}")).dropped


def test_commands_are_routed_when_the_broker_writes_dots_as_slashes() -> None:
    """RabbitMQ's MQTT plugin delivers ``tts/kiosk.1/cmd/ping`` as ``tts/kiosk/1/cmd/ping``."""
    device = Namespace("tts").device("kiosk.1")
    groups = ("floor.2",)
    for sent, rewritten, scope in [
            (device.command("ping"), "tts/kiosk/1/cmd/ping", "device"),
            (Namespace("tts").group_command("floor.2", "speak"), "tts/group/floor/2/cmd/speak",
             "group")]:
        assert device.route(sent, groups) == device.route(Topic(rewritten), groups)
        route = device.route(Topic(rewritten), groups)
        assert route is not None and route.scope == scope
    assert device.route(Topic("tts/kiosk/2/cmd/ping"), groups) is None
    assert Namespace("tts").device("kiosk").route(Topic("tts/kiosk/1/cmd/ping")) is None


def test_a_connection_closed_before_connack_suggests_mqtt_3_1_1() -> None:
    """A broker without MQTT 5 (RabbitMQ 3.10) closes the connection at an MQTT 5 CONNECT."""
    from agent.mqtt.connect import closed_hint

    assert 'mqtt.protocol = "3.1.1"' in closed_hint(MqttSettings())
    assert 'mqtt.protocol = "3.1.1"' in closed_hint(MqttSettings(tls=True))
    assert "mqtt.protocol" not in closed_hint(MqttSettings(protocol="3.1.1"))
