"""Home Assistant MQTT discovery against a real Mosquitto: the retained discovery message, its
entities working end to end (notify speaks into an ALSA file sink, the volume number, the stop
buttons; the volume kept across a restart), re-publication on Home Assistant's birth message,
removal when switched off (at a start and at a SIGHUP reload, and by ``tts-agent ha-discovery
--remove``), stable unique ids."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.volume_state import VolumeStore
from agent.mqtt.client import InboundMessage
from agent.mqtt.ha_addon import HaDiscovery, marker_path
from agent.mqtt.topics import DiscoveryTopics, Namespace, Topic
from agent.settings import Settings
from tests.support.broker import (
    Broker,
    Recorder,
    agent_env,
    agent_settings,
    alsa_file_device,
    running_agent,
)
from tests.support.cli import agent_cli
from tests.support.make_tiny_voice import build_bundle
from tests.support.paced_sink import BYTES_PER_S, PacedSink

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
HA = DiscoveryTopics("homeassistant", "t1")
WAIT_S = 60.0
_PATH = re.compile(r"value_json((?:\.[a-z_]+)+)")


def ha_settings(broker: Broker, models: Path, work: Path, **mqtt: Any) -> Settings:
    return agent_settings(broker, models, work, mqtt={"ha_discovery": True, **mqtt})


@pytest.fixture()
def watcher(mqtt_broker: Broker) -> Iterator[Recorder]:
    """Home Assistant's side: the discovery topic, the device's events, status and health."""
    filters = [HA.config.as_filter(), DEV.events.as_filter(), DEV.status.as_filter(),
               DEV.health.as_filter()]
    with Recorder(mqtt_broker.settings(), filters, "home-assistant") as recorder:
        yield recorder


def configs(recorder: Recorder) -> list[InboundMessage]:
    return [m for m in recorder.messages if m.topic == HA.config]


def wait_config(recorder: Recorder, after: int = 0) -> dict[str, Any]:
    """The discovery message, once more than ``after`` of them have arrived."""
    recorder.wait_for(lambda m: m.topic == HA.config and m.payload != b""
                      and len([c for c in configs(recorder) if c.payload]) > after, WAIT_S)
    return dict(json.loads([c for c in configs(recorder) if c.payload][-1].payload))


def final_for(recorder: Recorder, predicate: Any) -> dict[str, Any]:
    return recorder.wait_json(DEV.events, lambda e: e.get("final") and predicate(e), WAIT_S)


def resolve(payload: dict[str, Any], dotted: str) -> Any:
    value: Any = payload
    for key in dotted.strip(".").split("."):
        assert isinstance(value, dict) and key in value, f"{dotted} not in the payload"
        value = value[key]
    return value


def test_discovery_message_is_retained_and_well_formed(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    settings = ha_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                           ha_device_name="Lobby speaker")
    with running_agent(settings), Recorder(mqtt_broker.settings(), [
            DEV.status.as_filter(), DEV.health.as_filter()], "probe") as probe:
        status = probe.wait_json(DEV.status, lambda p: p["state"] == "online")
        health = probe.wait_json(DEV.health, lambda p: True)
        # a late subscriber (Home Assistant starting later) gets the retained message
        with Recorder(mqtt_broker.settings(), [HA.config.as_filter()], "late-ha") as late:
            message = late.wait_for(lambda m: m.topic == HA.config, WAIT_S)
    assert message.retain and len(message.payload) < 128 * 1024
    config = json.loads(message.payload)
    assert config["dev"]["name"] == "Lobby speaker"
    assert config["dev"]["identifiers"] == ["tts-agent-t1"]
    assert config["dev"]["sw_version"] == status["version"] and config["dev"]["model"]
    assert config["o"]["name"] == "tts-agent" and config["o"]["sw_version"]
    assert config["availability"][0]["topic"] == DEV.status.value
    platforms = {key: c["p"] for key, c in config["cmps"].items()}
    assert platforms == {"speak": "notify", "volume": "number", "stop": "button",
                         "stop_all": "button", "state": "sensor", "queue": "sensor",
                         "last_synthesis": "sensor", "voice": "sensor", "version": "sensor",
                         "problem": "binary_sensor"}
    for key, component in config["cmps"].items():
        assert component["unique_id"] == f"tts-agent-t1-{key}"
        if component["p"] in ("notify", "number", "button"):
            assert Topic(component["command_topic"]).value.startswith("tts/t1/")
        if component["p"] in ("number", "sensor", "binary_sensor"):
            assert component["state_topic"] == DEV.health.value
        # every value_json path a template reads is in the real payload it reads
        for name in ("value_template", "json_attributes_template"):
            for dotted in _PATH.findall(component.get(name, "")):
                resolve(health, dotted)
    for dotted in _PATH.findall(config["availability"][0]["value_template"]):
        assert resolve(status, dotted) == "online"
    assert health["requests"]["last_synthesis_s"] is None  # nothing synthesized yet


def test_notify_speaks_plain_text_and_json(mqtt_broker: Broker, tiny_voice_dir: Path,
                                           tmp_path: Path, watcher: Recorder) -> None:
    settings = ha_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                           ha_priority="high")
    out = tmp_path / "agent" / "out.raw"
    with running_agent(settings):
        config = wait_config(watcher)
        notify = Topic(config["cmps"]["speak"]["command_topic"])
        watcher.publish(notify, "Hello from Home Assistant.")  # what notify.send_message sends
        plain = final_for(watcher, lambda e: e.get("command") == "speak")
        watcher.publish(notify, {"id": "ha-1", "text": "Doors closing.", "priority": "low"})
        as_json = final_for(watcher, lambda e: e["id"] == "ha-1")
        watcher.publish(notify, "x" * (settings.synthesis.max_text_chars + 1))
        too_long = final_for(watcher, lambda e: e["event"] == "rejected")
        watcher.publish(notify, "Retained.", retain=True)
        retained = final_for(watcher, lambda e: e["event"] == "rejected"
                             and "retained" in e["reason"])
        watcher.publish(notify, b"", retain=True)  # clear it
        watcher.publish(DEV.command("ping"), b"")  # a fresh health report
        health = watcher.wait_json(DEV.health, lambda p: p["requests"]["last_synthesis_s"]
                                   is not None)
    assert plain["event"] == "finished" and plain["priority"] == "high", plain
    accepted = [e for e in watcher.json_on(DEV.events)
                if e["id"] == plain["id"] and e["event"] == "accepted"]
    assert accepted and accepted[0]["voice"] == "tiny-test"
    assert as_json["event"] == "finished" and as_json["priority"] == "low"
    assert "longer than" in too_long["reason"] and "\n" not in too_long["reason"]
    assert retained["command"] == "speak"
    assert out.stat().st_size > 0
    assert health["requests"]["last_synthesis_s"] >= 0


def test_notify_refuses_a_json_array_and_deep_json(mqtt_broker: Broker, tiny_voice_dir: Path,
                                                  tmp_path: Path, watcher: Recorder) -> None:
    """A JSON array was read aloud as text (#24): now it is ``rejected`` with the reason, and
    so is JSON nested too deeply; nothing of either is accepted or spoken."""
    settings = ha_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    with running_agent(settings):
        wait_config(watcher)
        watcher.publish(DEV.ha_notify, b'["Hello", "world"]')
        array = final_for(watcher, lambda e: e["event"] == "rejected")
        watcher.publish(DEV.ha_notify, b"[" * 60_000)
        deep = final_for(watcher, lambda e: e["event"] == "rejected" and e["id"] != array["id"])
        watcher.publish(DEV.ha_notify, "Still spoken.")
        spoken = final_for(watcher, lambda e: e["event"] == "finished")
    assert "a JSON array is not a notify message" in array["reason"], array
    assert "nested too deeply" in deep["reason"], deep
    assert array["command"] == deep["command"] == "speak"
    accepted = {e["id"] for e in watcher.json_on(DEV.events) if e["event"] == "accepted"}
    assert accepted == {spoken["id"]}


def test_volume_number_and_stop_buttons(mqtt_broker: Broker, tiny_voice_dir: Path,
                                        tmp_path: Path, watcher: Recorder) -> None:
    sink = PacedSink(tmp_path / "card.fifo", BYTES_PER_S)
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"ha_discovery": True},
                              audio={"device": alsa_file_device(sink.path), "keep_open_s": 60.0})
    try:
        with running_agent(settings):
            cmps = wait_config(watcher)["cmps"]
            number = cmps["volume"]
            # what Home Assistant renders for a slider set to 42 (Jinja: 42 / 100)
            payload = number["command_template"].replace("{{ value / 100 }}", str(42 / 100))
            watcher.publish(Topic(number["command_topic"]), payload)
            done = final_for(watcher, lambda e: e.get("command") == "volume")
            health = watcher.wait_json(DEV.health, lambda p: p["audio"]["volume"] == 0.42)
            long_text = " ".join(f"Announcement number {n} is still going on." for n in range(40))
            watcher.publish(DEV.command("speak"), {"id": "long", "text": long_text})
            watcher.publish(DEV.command("speak"), {"id": "next", "text": long_text})
            watcher.wait_json(DEV.events, lambda e: e["id"] == "long" and e["event"] == "started",
                              WAIT_S)
            stop = cmps["stop"]
            watcher.publish(Topic(stop["command_topic"]), stop["payload_press"])
            cut = final_for(watcher, lambda e: e["id"] == "long")
            watcher.wait_json(DEV.events, lambda e: e["id"] == "next" and e["event"] == "started",
                              WAIT_S)
            stop_all = cmps["stop_all"]
            watcher.publish(Topic(stop_all["command_topic"]), stop_all["payload_press"])
            cut_next = final_for(watcher, lambda e: e["id"] == "next")
    finally:
        sink.close()
    assert done["event"] == "done" and done["volume"] == 0.42
    assert resolve(health, _PATH.findall(number["value_template"])[0]) * 100 == 42
    assert cut["event"] == "interrupted" and cut_next["event"] == "interrupted"
    stops = [e for e in watcher.json_on(DEV.events) if e.get("command") == "stop"]
    assert [e["event"] for e in stops] == ["done", "done"]
    _volume_and_queued_speech_survive_a_restart(mqtt_broker, tiny_voice_dir, tmp_path, watcher,
                                                number["value_template"])


def _volume_and_queued_speech_survive_a_restart(
        broker: Broker, voice_dir: Path, tmp_path: Path, watcher: Recorder,
        value_template: str) -> None:
    """#28.9: the volume Home Assistant set (42 %) is the one in force after a restart, in health
    and so in the slider, until ``audio.volume`` is changed in the settings. #28.11: what
    docs/home-assistant.md offers for speech sent while the agent is down: a QoS 1 ``speak`` with
    ``expires_at``, kept for the agent's session, is spoken when it is back, or ``expired``."""
    settings = ha_settings(broker, voice_dir.parent, tmp_path / "agent")  # the same cache.dir
    stored = VolumeStore.for_settings(settings).path  # beside the device's request journal
    assert json.loads(stored.read_text())["volume"] == 0.42
    watcher.publish(DEV.command("speak"), {"id": "while-down", "text": "Back again.",
                                           "expires_at": time.time() + 600}, qos=1)
    late = time.time() + 0.2
    watcher.publish(DEV.command("speak"), {"id": "too-late", "text": "Never said.",
                                           "expires_at": late}, qos=1)
    while time.time() < late + 0.1:  # its deadline passes while it waits in the broker
        time.sleep(0.05)
    with running_agent(settings) as service:
        own = service.instance.id
        health = watcher.wait_json(DEV.health, lambda p: p["instance"]["id"] == own)
        spoken = final_for(watcher, lambda e: e["id"] == "while-down")
        expired = final_for(watcher, lambda e: e["id"] == "too-late")
        assert service.ping_status().volume == 0.42
    assert health["audio"]["volume"] == 0.42
    assert resolve(health, _PATH.findall(value_template)[0]) * 100 == 42
    assert spoken["event"] == "finished" and expired["event"] == "expired", (spoken, expired)
    # the operator changes audio.volume: the setting wins, and the stored volume is dropped
    data = settings.model_dump()
    data["audio"]["volume"] = 0.8
    with running_agent(Settings(**data)) as service:
        own = service.instance.id
        health = watcher.wait_json(DEV.health, lambda p: p["instance"]["id"] == own)
    assert health["audio"]["volume"] == 0.8 and not stored.exists()


def test_birth_message_republishes(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path,
                                   watcher: Recorder) -> None:
    settings = ha_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    with running_agent(settings) as service:
        first = wait_config(watcher)
        addon = service.addons.get("ha_discovery")
        assert isinstance(addon, HaDiscovery)
        before = addon.published
        seen = len([c for c in configs(watcher) if c.payload])  # counted before the birth
        watcher.publish(HA.birth, "offline")
        watcher.publish(HA.birth, "x" * 1000)  # not Home Assistant's: ignored
        watcher.publish(HA.birth, "online")
        deadline = time.monotonic() + WAIT_S  # the add-on republishes after a short delay
        while addon.published == before:
            assert time.monotonic() < deadline, "the birth message was not answered"
            time.sleep(0.05)
        again = wait_config(watcher, after=seen)
        assert addon.published > before
    assert again == first


def test_switched_off_at_start_and_at_reload_clears_it(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, watcher: Recorder) -> None:
    work = tmp_path / "agent"
    on = ha_settings(mqtt_broker, tiny_voice_dir.parent, work)
    off = agent_settings(mqtt_broker, tiny_voice_dir.parent, work)
    assert off.mqtt.ha_discovery is False
    with running_agent(on):
        wait_config(watcher)
    assert marker_path(on).exists()
    with running_agent(off):
        cleared = watcher.wait_for(lambda m: m.topic == HA.config and m.payload == b"", WAIT_S)
    assert cleared.retain and not marker_path(on).exists()
    # at a SIGHUP reload: on, then the settings file says off
    with running_agent(on) as service:
        seen = len(configs(watcher))
        wait_config(watcher, after=len([c for c in configs(watcher) if c.payload]))
        summary = service.reload(lambda: off)
        watcher.wait_for(lambda m: m.topic == HA.config and m.payload == b""
                         and len(configs(watcher)) > seen + 1, WAIT_S)
        watcher.publish(DEV.ha_notify, "Still there?")  # answered, not dropped
        refused = final_for(watcher, lambda e: e["event"] == "rejected")
    assert "discovery is off" in refused["reason"] and refused["command"] == "speak"
    assert "restart needed" not in summary, summary
    with Recorder(mqtt_broker.settings(), [HA.config.as_filter(), DEV.status.as_filter()],
                  "fresh") as fresh:  # a fresh subscriber finds nothing retained
        fresh.wait_json(DEV.status, lambda p: p["state"] == "stopped")
        assert configs(fresh) == []


def test_remove_command(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path,
                        watcher: Recorder) -> None:
    settings = ha_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    with running_agent(settings):
        published = wait_config(watcher)
    shown = agent_cli("ha-discovery", env=agent_env(settings), timeout=60)
    assert shown.returncode == 0, shown.stderr  # was check=True
    printed = json.loads(shown.stdout)
    assert printed["topic"] == HA.config.value
    assert "hw_version" in published["dev"]  # the board and profile this agent runs with
    assert printed["payload"] == published  # exactly what the agent publishes (#28 item 14)
    result = agent_cli("ha-discovery", "--remove", env=agent_env(settings), timeout=60)
    assert result.returncode == 0, result.stderr
    assert HA.config.value in result.stdout
    cleared = watcher.wait_for(lambda m: m.topic == HA.config and m.payload == b"", WAIT_S)
    assert cleared.retain


def test_unique_ids_stay_across_restart_and_model_swap(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, watcher: Recorder) -> None:
    settings = ha_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    with running_agent(settings):
        first = wait_config(watcher)
    build_bundle(tiny_voice_dir.parent, version="2.0.0", gain=0.7)  # a new model in place
    with running_agent(settings) as service:
        second = wait_config(watcher, after=len([c for c in configs(watcher) if c.payload]))
        watcher.publish(DEV.command("reload"), {"id": "r1"})
        final_for(watcher, lambda e: e["id"] == "r1")
        assert service.voices.get(None).version == "2.0.0"
        mqtt_broker.restart()  # reconnect: published again
        third = wait_config(watcher, after=len([c for c in configs(watcher) if c.payload]))

    def ids(config: dict[str, Any]) -> dict[str, str]:
        return {key: c["unique_id"] for key, c in config["cmps"].items()}

    assert ids(first) == ids(second) == ids(third)
    assert first["dev"]["identifiers"] == third["dev"]["identifiers"]
