"""Home Assistant discovery pieces without a broker: the settings, the topics, the message,
the notify mapping, the marker file and what a reload applies."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.daemon.reload import reload_settings
from agent.mqtt.client import InboundMessage
from agent.mqtt.ha_addon import published_topic
from agent.mqtt.ha_discovery import DiscoveryInfo, discovery_payload, notify_request
from agent.mqtt.protocol import CommandRejected, SpeakCommand
from agent.mqtt.topics import DiscoveryTopics, Namespace, Topic, TopicError
from agent.settings import MqttSettings, Settings


def message(topic: str, payload: bytes, *, retain: bool = False) -> InboundMessage:
    return InboundMessage(topic=Topic(topic), payload=payload, retain=retain, duplicate=False,
                          response_topic=None, correlation_data=None, expiry_s=None,
                          received=time.monotonic())


def test_settings_defaults_and_checks() -> None:
    mqtt = MqttSettings()
    assert (mqtt.ha_discovery, mqtt.ha_prefix, mqtt.ha_priority) == (False, "homeassistant",
                                                                     "normal")
    assert MqttSettings(ha_prefix="ha/site-1").ha_prefix == "ha/site-1"
    for bad in ("ha/#", "+", "$SYS", "/ha", "ha/", "ha//x", "tts", "tts/ha"):
        with pytest.raises(ValidationError, match="ha_prefix"):
            MqttSettings(ha_prefix=bad)
    with pytest.raises(ValidationError, match="must not contain each other"):
        MqttSettings(topic_prefix="homeassistant/tts")
    with pytest.raises(ValidationError, match="ha_priority"):
        MqttSettings(ha_priority="loud")


def test_discovery_topics() -> None:
    topics = DiscoveryTopics("homeassistant", "kiosk.1")
    assert topics.node_id == "kiosk_1"
    assert topics.config.value == "homeassistant/device/kiosk_1/config"
    assert topics.birth.value == "homeassistant/status"
    assert Namespace("tts").device("kiosk.1").ha_notify.value == "tts/kiosk.1/ha/notify"
    with pytest.raises(TopicError):
        DiscoveryTopics("homeassistant/", "kiosk")


def test_unique_ids_depend_on_the_device_id_alone() -> None:
    topics = Namespace("tts").device("kiosk-1")
    one = json.loads(discovery_payload(DiscoveryInfo(
        device_id="kiosk-1", name=None, version="0.1.0", hardware=None), topics))
    two = json.loads(discovery_payload(DiscoveryInfo(
        device_id="kiosk-1", name="Lobby", version="9.9.9", hardware="Pi 5 (profile rpi5)"),
        topics))
    assert {k: c["unique_id"] for k, c in one["cmps"].items()} == {
        k: c["unique_id"] for k, c in two["cmps"].items()}
    assert all("p" in c and c["unique_id"].startswith("tts-agent-kiosk-1-")
               for c in one["cmps"].values())
    assert two["dev"]["hw_version"] == "Pi 5 (profile rpi5)" and "hw_version" not in one["dev"]
    assert one["dev"]["name"] == "kiosk-1" and two["dev"]["name"] == "Lobby"


def test_notify_request_plain_text_and_json() -> None:
    limits = {"priority": "high", "max_payload_bytes": 1024, "max_text_chars": 100}
    plain = notify_request(message("tts/t1/ha/notify", "Doors closing, «now».".encode()),
                           **limits)
    assert isinstance(plain.command, SpeakCommand) and plain.name == "speak"
    assert (plain.command.text, plain.command.priority) == ("Doors closing, «now».", "high")
    assert plain.command.id  # generated
    as_json = notify_request(message("tts/t1/ha/notify",
                                     b' {"id": "a-1", "text": "Hi.", "voice": "v"}'), **limits)
    assert isinstance(as_json.command, SpeakCommand)
    assert (as_json.id, as_json.command.voice, as_json.command.priority) == ("a-1", "v", "normal")
    refused = {
        b"": "text is empty",
        b"  ": "text is empty",
        b"\xff\xfe": "not UTF-8",
        b"x" * 101: "longer than 100",
        b"x" * 1025: "payload too large",
        b'{"text": "Hi.", "colour": "red"}': "unknown field 'colour'",
        b"{not json": "malformed JSON",
    }
    for payload, reason in refused.items():
        with pytest.raises(CommandRejected, match=reason) as caught:
            notify_request(message("tts/t1/ha/notify", payload), **limits)
        assert "\n" not in caught.value.reason
    with pytest.raises(CommandRejected, match="retained"):
        notify_request(message("tts/t1/ha/notify", b"Hi.", retain=True), **limits)


def test_notify_refuses_json_that_is_not_an_object() -> None:
    """A JSON array (or JSON nested too deeply) is not a notification to read aloud; text
    that only starts with a bracket, and a bare number, are plain text as before."""
    limits = {"priority": "normal", "max_payload_bytes": 200_000, "max_text_chars": 100}
    refused = {
        b'["Hello", "world"]': "a JSON array is not a notify message",
        b" [1, 2, 3]": "a JSON array is not a notify message",
        b"[" * 100_000: "nested too deeply",
        b'{"text": "x", "deep": ' + b"[" * 100_000 + b"}": "nested too deeply",
    }
    for payload, reason in refused.items():
        with pytest.raises(CommandRejected, match=reason) as caught:
            notify_request(message("tts/t1/ha/notify", payload), **limits)
        assert "\n" not in caught.value.reason
    for text in ("[Alarm] front door open.", "21.5", "[" * 50):
        spoken = notify_request(message("tts/t1/ha/notify", text.encode()), **limits)
        assert isinstance(spoken.command, SpeakCommand) and spoken.command.text == text


def test_marker_is_read_only_when_it_names_a_discovery_topic(tmp_path: Path) -> None:
    marker = tmp_path / "ha-discovery.json"
    assert published_topic(marker) is None
    marker.write_text(json.dumps({"topic": "ha/site/device/k_1/config"}))
    assert published_topic(marker) == Topic("ha/site/device/k_1/config")
    for junk in ('{"topic": "tts/k1/status"}', '{"topic": "a/#"}', "[1]", "{", "\xff" * 9000,
                 '{"topic": 5}'):
        marker.write_text(junk)
        assert published_topic(marker) is None


def test_marker_that_is_not_a_regular_file_is_not_read(tmp_path: Path) -> None:
    # A FIFO in the marker's place (anyone who can write the state directory can make one)
    # must not block the add-on or the ha-discovery command: it is ignored like junk. The
    # read runs on a thread so that a blocking open fails the test instead of hanging it.
    marker = tmp_path / "ha-discovery.json"
    os.mkfifo(marker)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(published_topic(marker)), daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():
        with open(marker, "wb"):  # let the blocked open return, so the thread ends
            pass
        pytest.fail("published_topic blocked on a FIFO in the marker's place")
    assert found == [None]
    marker.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"topic": "ha/site/device/k_1/config"}))
    marker.symlink_to(target)
    assert published_topic(marker) is None


def test_reload_applies_the_discovery_settings_at_once() -> None:
    current = Settings(device_id="t1", mqtt={"ha_discovery": True})
    off = Settings(device_id="t1", mqtt={"ha_discovery": False, "ha_prefix": "ha"})
    applied, change = reload_settings(current, lambda: off)
    assert (applied.mqtt.ha_discovery, applied.mqtt.ha_prefix) == (False, "ha")
    assert change.restart == () and "restart needed" not in change.line()
    moved = Settings(device_id="t1", mqtt={"ha_discovery": False, "port": 1884})
    applied, change = reload_settings(current, lambda: moved)
    assert applied.mqtt.ha_discovery is False and applied.mqtt.port == 1883
    assert change.restart == ("mqtt",) and "restart needed for mqtt" in change.line()


def ha_entity_ids(device_name: str) -> dict[str, str]:
    """The entity ids Home Assistant makes at the first discovery of each component: platform,
    then the device's name and the entity's name, slugified (lower case, ``_`` between)."""
    payload = json.loads(discovery_payload(DiscoveryInfo(
        device_id="lobby-1", name=device_name, version="0.1.0", hardware=None),
        Namespace("tts").device("lobby-1")))

    def slug(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return {c["name"]: f"{c['p']}.{slug(payload['dev']['name'] + ' ' + c['name'])}"
            for c in payload["cmps"].values()}


def test_the_entity_ids_in_the_docs_are_those_the_message_makes() -> None:
    """#28.10: docs/home-assistant.md#entity-ids lists every entity with the id Home Assistant
    gives it for ``ha_device_name = "Lobby speaker"``."""
    page = (Path(__file__).parents[2] / "docs" / "home-assistant.md").read_text()
    section = page.split("### Entity ids", 1)[1].split("\n### ", 1)[0]
    assert 'ha_device_name = "Lobby speaker"' in section
    rows = dict(re.findall(r"^\| ([A-Z][^|]*?) \| `([a-z_]+\.[a-z_]+)` \|$", section, re.M))
    assert rows == ha_entity_ids("Lobby speaker")
    assert rows["Speak"] == "notify.lobby_speaker_speak"  # the id the automation example uses
    assert "entity_id: notify.lobby_speaker_speak" in page


def test_group_entity_renders_a_synchronized_speak_as_home_assistant_would() -> None:
    import datetime

    import jinja2

    from agent.mqtt.ha_discovery import group_payload
    from agent.mqtt.protocol import SpeakCommand, parse_command
    from agent.mqtt.topics import DiscoveryTopics, Namespace

    one = group_payload(Namespace("tts"), "hall", lead_s=4.0, priority="high")
    assert one == group_payload(Namespace("tts"), "hall", lead_s=4.0, priority="high")
    config = json.loads(one)
    assert config["unique_id"] == "tts-agent-group-hall-speak"
    assert config["command_topic"] == "tts/group/hall/cmd/speak"
    assert DiscoveryTopics("homeassistant", "a").group_config("hall").value == (
        "homeassistant/notify/tts-agent-group-hall/config")
    assert DiscoveryTopics("homeassistant", "a").group_config("a.b") != (
        DiscoveryTopics("homeassistant", "a").group_config("a_b"))
    now = datetime.datetime.now(datetime.UTC)
    home_assistant = jinja2.Environment()  # noqa: S701 (Home Assistant's does not escape)
    rendered = home_assistant.from_string(config["command_template"]).render(
        value='Dinner "now" <b>', now=lambda: now)
    command = parse_command("speak", rendered.encode(), max_payload_bytes=65536,
                            max_text_chars=1000)
    assert isinstance(command, SpeakCommand)
    assert command.text == 'Dinner "now" <b>' and command.priority == "high"
    assert command.at == int(now.timestamp() * 1000) + 4000
