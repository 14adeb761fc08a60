"""The daemon's health and systemd integration, end to end, with the real process.

Every test starts ``python -m agent run`` as a child process, with a real Mosquitto
(:mod:`broker`), alsa-lib playing into an ALSA ``file`` PCM, and a stand-in for systemd's
notify socket bound by the test (:mod:`notify_socket`). Nothing inside the agent is mocked:
the hung synthesis worker is a real onnxruntime inference that never returns
(:mod:`stall_voice`), the missing audio device is an ALSA PCM whose definition is removed
from the ALSA configuration while the agent runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent import __version__
from agent.health.report import AudioSection, HealthReport, MqttSection, QueueSection
from agent.health.snapshot import Health
from agent.mqtt.client import OutboundMessage, Publication
from agent.mqtt.publisher import EventPublisher
from agent.mqtt.topics import Namespace
from agent.mqtt.tracker import RequestTracker
from agent.settings import CacheSettings, Settings
from agent.voice.bundle import read_manifest
from tests.support import stall_voice
from tests.support.broker import Broker, Recorder, agent_settings, daemon
from tests.support.make_tiny_voice import build_bundle
from tests.support.notify_socket import Message, NotifySocket

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
SYSTEM_ALSA_CONF = Path("/usr/share/alsa/alsa.conf")
FAST_HEALTH = {"state_check_s": 0.5, "interval_s": 3600}
"""Re-evaluate often, publish periodically almost never: a publication is then either the
first one, a fresh one after a connect or a ``ping``, or a change of state."""


# -- helpers ---------------------------------------------------------------------------------

def fields_of(messages: list[Message], key: str) -> list[str]:
    return [m.fields[key] for m in messages if key in m]


def watch(broker: Broker, name: str) -> Recorder:
    """A recorder of the device's health, events and presence."""
    return Recorder(broker.settings(), [DEV.health.as_filter(), DEV.events.as_filter(),
                                        DEV.status.as_filter()], name)


def final_event(rec: Recorder, request_id: str, timeout: float = 30) -> dict[str, Any]:
    return rec.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"], timeout)


def health_after(rec: Recorder, since: float, predicate: Any = lambda h: True,
                 timeout: float = 30) -> dict[str, Any]:
    """The first health report taken after ``since`` (the agent's uptime_s) matching."""
    return rec.wait_json(DEV.health, lambda h: h["uptime_s"] > since and predicate(h), timeout)


def stop_gracefully(process: subprocess.Popen[bytes], notify: NotifySocket) -> list[Message]:
    process.send_signal(signal.SIGTERM)
    tail = notify.receive_until("STOPPING", timeout=30)
    assert process.wait(60) == 0
    return tail


def write_alsa_conf(path: Path, pcm_file: Path | None) -> None:
    """Define PCM ``ttsout`` (a file PCM writing to ``pcm_file``), or nothing when None.

    Written to a new file and renamed over the old one, so alsa-lib (which re-reads its
    configuration when a file's inode or mtime changes) sees the change at its next open.
    """
    text = "# the output device is gone\n"
    if pcm_file is not None:
        text = ("pcm.ttsout {\n    type file\n    slave.pcm \"null\"\n"
                f"    file \"{pcm_file}\"\n    format \"raw\"\n}}\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def assert_health_fields(h: dict[str, Any], *, voice: str, voice_dir: Path) -> None:
    """Every figure issue 8 asks for is in the report, with the right shape."""
    assert h["schema"] == 1 and h["device_id"] == "t1" and h["version"] == __version__
    assert h["state"] in ("ok", "degraded", "failing") and isinstance(h["reasons"], list)
    assert h["uptime_s"] > 0
    hardware = h["hardware"]
    assert hardware["profile"] and hardware["intra_op_num_threads"] >= 1
    assert {"inter_op_num_threads", "model_variant", "tune"} <= hardware.keys()
    loaded = {v["voice"]: v for v in h["voices"]["voices"]}
    manifest = read_manifest(voice_dir)
    entry = loaded[voice]
    # the variant the hardware profile asked for, when the bundle has it (fp32 otherwise)
    wanted = hardware["model_variant"]
    variant = wanted if wanted in manifest["variants"] else "fp32"
    assert entry["version"] == manifest["version"] and entry["variant"] == variant
    assert entry["sha256"] == manifest["files"][manifest["variants"][variant]]["sha256"]
    assert entry["loaded_at"] > 1.7e9
    streaming = entry["streaming"]
    if voice == "en_US-joe-medium":  # a Piper VITS voice streams its first sentences in windows
        assert streaming["first_window_s"] == 0.4644 and streaming["context_s"] == 0.0116
        assert streaming["max_window_s"] == 0.743 and streaming["growth"] >= 1
    else:  # the tiny test voice has no decoder to cut at: it decodes whole
        assert streaming is None
    assert h["voices"]["last_reload"][voice]["outcome"] == "loaded"
    assert {"depth", "max", "pending"} <= h["queue"].keys()
    requests = h["requests"]
    assert {"served", "failed", "synthesis_s", "rtf", "first_audio_s"} <= requests.keys()
    audio = h["audio"]
    assert audio["state"] in ("ok", "degraded") and audio["underruns"] >= 0
    assert h["mqtt"]["enabled"] and h["mqtt"]["connected"] and h["mqtt"]["reconnects"] >= 0
    system = h["system"]
    assert {"cpu_temp_c", "thermal_zones", "throttled", "load_avg"} <= system.keys()
    assert len(system["load_avg"]) == 3 and system["rss_bytes"] > 10 * 1024 * 1024
    assert system["disk"]["free_bytes"] > 0
    assert set(h["workers"]) == {"synthesis", "audio", "mqtt"}
    # the typed report names exactly what goes on the wire; the sections of optional parts
    # (a device lexicon, the Wyoming server) are there only while they are set, and these
    # settings set neither
    only_when_set = {HealthReport: {"lexicon", "wyoming"}}
    for typed, section in ((HealthReport, h), (AudioSection, audio), (QueueSection, h["queue"]),
                           (MqttSection, h["mqtt"])):
        keys = set(typed.__required_keys__ | typed.__optional_keys__)
        assert set(section) == keys - only_when_set.get(typed, set()), typed


# -- request figures -------------------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Published:
    """Stands in for the MQTT client under the tracker (wiring only)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, message: OutboundMessage) -> Publication:
        self.events.append(json.loads(message.payload))
        done = threading.Event()
        done.set()
        return Publication(len(self.events), done)


def test_the_tracker_feeds_the_health_figures(tmp_path: Path) -> None:
    health = Health(Settings(device_id="t1", cache=CacheSettings(dir=tmp_path)))
    clock, published = _Clock(), _Published()
    tracker = RequestTracker(EventPublisher(published, DEV), recorder=health, clock=clock)

    tracker.open("a", "speak")
    clock.now += 0.25
    tracker.progress("a", "started")
    tracker.note("a", synthesis_ms=500.0)
    clock.now += 3.0
    tracker.finish("a", "finished", audio_s=2.0)
    tracker.open("b", "speak")
    tracker.finish("b", "failed", reason="device gone")
    tracker.answer("c", "speak", "rejected", reason="unknown voice")
    tracker.answer("d", "ping", "pong")  # not a speak request: not counted
    tracker.answer("e", "reload", "failed", reason="bad model")  # nor this

    requests = health.snapshot()["requests"]
    assert (requests["served"], requests["failed"]) == (1, 1)
    assert requests["total"] == {"finished": 1, "failed": 1, "rejected": 1, "expired": 0,
                                 "interrupted": 0}
    assert requests["first_audio_s"] == {"p50": 0.25, "p95": 0.25}
    assert requests["synthesis_s"] == {"p50": 0.5, "p95": 0.5}
    assert requests["rtf"] == {"p50": 0.25, "p95": 0.25}
    assert [e["event"] for e in published.events] == [
        "accepted", "started", "finished", "accepted", "failed", "rejected", "pong", "failed"]


# -- systemd ---------------------------------------------------------------------------------

def test_ready_after_warm_up_then_watchdog_status_and_stopping(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, notify: NotifySocket,
) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    settings = settings.model_copy(update={"health": settings.health.model_copy(
        update=FAST_HEALTH), "log": settings.log.model_copy(update={"level": "info"})})
    log_path = tmp_path / "agent.log"
    with watch(mqtt_broker, "watch") as rec, daemon(
            settings, log_path, env=notify.env(WATCHDOG_USEC="400000")) as agent:
        before_ready = notify.receive_until("READY", timeout=60)
        log_at_ready = log_path.read_text(encoding="utf-8")
        # READY comes after the voice was loaded and warmed up (the log is written first).
        assert "voice_loaded" in log_at_ready and "default_voice_ready" in log_at_ready
        assert "starting: loading voice tiny-test" in fields_of(before_ready, "STATUS")
        assert before_ready[-1].fields["READY"] == "1"
        assert "served 0, failed 0" in before_ready[-1].fields["STATUS"]

        after_ready = notify.receive_until("WATCHDOG") + notify.receive_until("WATCHDOG")
        after_ready += notify.receive_until("WATCHDOG")
        assert len(fields_of(after_ready, "WATCHDOG")) == 3

        rec.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=30)
        rec.publish(DEV.command("speak"), {"id": "s1", "text": "Hello there."})
        assert final_event(rec, "s1")["event"] == "finished"
        # STATUS follows the health summary.
        deadline = time.monotonic() + 30
        statuses: list[str] = []
        while not any("served 1, failed 0" in s for s in statuses):
            assert time.monotonic() < deadline, f"no STATUS with the request; got {statuses}"
            message = notify.receive(timeout=1)
            if message is not None:
                after_ready.append(message)
                statuses += fields_of([message], "STATUS")
        assert statuses[-1].startswith("ok")

        tail = stop_gracefully(agent, notify)
        stopped = rec.wait_json(DEV.status, lambda p: p["state"] == "stopped")
    assert tail[-1].fields["STOPPING"] == "1"
    assert stopped["device"] == "t1"
    # NotifyAccess=main: every message comes from the agent's main PID (threads included).
    assert {m.pid for m in [*before_ready, *after_ready, *tail]} == {agent.pid}


def test_sighup_reloads_settings_and_voices(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, notify: NotifySocket,
) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    settings = settings.model_copy(update={
        "health": settings.health.model_copy(update=FAST_HEALTH),
        "models": settings.models.model_copy(update={"debounce_s": 0.0}),
    })
    config = tmp_path / "agent.toml"
    config.write_text('[log]\nlevel = "warning"\n', encoding="utf-8")
    log_path = tmp_path / "agent.log"
    with watch(mqtt_broker, "watch") as rec, daemon(
            settings, log_path, "--config", str(config), env=notify.env(),
            drop_env=("TTS_AGENT_LOG__LEVEL",)) as agent:
        notify.receive_until("READY", timeout=60)
        first = rec.wait_json(DEV.health, lambda h: True)
        assert first["voices"]["voices"][0]["version"] == "1.0.0"
        assert "reload_finished" not in log_path.read_text(encoding="utf-8")

        # A new version of the voice, and a more talkative log level, then SIGHUP.
        build_bundle(tiny_voice_dir.parent, version="2.0.0", gain=0.25)
        config.write_text('[log]\nlevel = "info"\n', encoding="utf-8")
        agent.send_signal(signal.SIGHUP)
        reloading = notify.receive_until("RELOADING", timeout=30)
        assert "MONOTONIC_USEC" in reloading[-1]
        ready = notify.receive_until("READY", timeout=60)[-1]
        assert ready.fields["STATUS"].startswith("reloaded: log level info; voices 1 loaded")

        after = health_after(rec, first["uptime_s"],
                             lambda h: h["voices"]["voices"][0]["version"] == "2.0.0")
        assert after["voices"]["last_reload"]["tiny-test"]["outcome"] == "loaded"
        assert after["state"] == "ok"
        loaded = [e["version"] for e in rec.json_on(DEV.events) if e["event"] == "model_loaded"]
        assert loaded == ["1.0.0", "2.0.0"]  # at start-up, then by the reload
        # The new log level is in force: info lines (invisible at "warning") now appear.
        assert "reload_finished" in log_path.read_text(encoding="utf-8")

        rec.publish(DEV.command("speak"), {"id": "after-reload", "text": "Still here."})
        finished = final_event(rec, "after-reload")
        assert finished["event"] == "finished" and finished["version"] == "2.0.0"
        stop_gracefully(agent, notify)


@pytest.mark.slow
def test_a_hung_synthesis_worker_stops_the_watchdog_while_the_rest_runs(
    mqtt_broker: Broker, tmp_path: Path, notify: NotifySocket,
) -> None:
    models = tmp_path / "models"
    stall_voice.build_bundle(models)
    settings = agent_settings(mqtt_broker, models, tmp_path / "agent", voice=stall_voice.VOICE)
    settings = settings.model_copy(update={"health": settings.health.model_copy(
        update={**FAST_HEALTH, "stall_s": 1.0})})
    with watch(mqtt_broker, "watch") as rec, daemon(
            settings, tmp_path / "agent.log", env=notify.env(WATCHDOG_USEC="400000")) as agent:
        notify.receive_until("READY", timeout=60)
        notify.receive_until("WATCHDOG")
        ok = rec.wait_json(DEV.health, lambda h: h["state"] == "ok")
        rec.publish(DEV.command("speak"), {"id": "fine", "text": "This one is fine."})
        assert final_event(rec, "fine")["event"] == "finished"

        rec.publish(DEV.command("speak"), {"id": "hang", "text": "This one never ends.",
                                           "speed": stall_voice.HANG_SPEED})
        rec.wait_json(DEV.events, lambda e: e["id"] == "hang" and e["event"] == "accepted")
        # Published at once on the change of state (the interval is an hour).
        failing = health_after(rec, ok["uptime_s"], lambda h: h["state"] == "failing")
        assert failing["reasons"][0].startswith("worker synthesis hung: busy on one item")
        assert failing["workers"]["synthesis"]["state"] == "hung"
        assert failing["workers"]["mqtt"]["state"] != "hung"
        assert failing["workers"]["audio"]["state"] != "hung"

        # From now on no WATCHDOG=1: systemd would restart the agent.
        notify.drain()
        quiet: list[Message] = []
        deadline = time.monotonic() + 3.0
        while (left := deadline - time.monotonic()) > 0:
            message = notify.receive(timeout=left)
            if message is not None:
                quiet.append(message)
        assert not fields_of(quiet, "WATCHDOG"), quiet

        # ...while the rest keeps working: commands are answered, health is published.
        rec.publish(DEV.command("ping"), {"id": "still-there"})
        assert final_event(rec, "still-there")["event"] == "pong"
        fresh = health_after(rec, failing["uptime_s"])
        assert fresh["state"] == "failing" and fresh["queue"]["pending"] == 1
        assert fresh["mqtt"]["connected"]

        tail = stop_gracefully(agent, notify)
        assert tail[-1].fields["STOPPING"] == "1"
        assert final_event(rec, "hang")["event"] == "interrupted"  # cut within the bound
        rec.wait_json(DEV.status, lambda p: p["state"] == "stopped")
    log = (tmp_path / "agent.log").read_text(encoding="utf-8")
    assert "workers_did_not_stop" in log and "exiting_without_teardown" in log


# -- health over the broker --------------------------------------------------------------------

def test_health_over_the_broker_has_every_field_and_flips_to_degraded(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, notify: NotifySocket,
) -> None:
    work = tmp_path / "agent"
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, work, audio={
        "device": "ttsout", "keep_open_s": 0.2, "reopen_interval_s": 0.2})
    settings = settings.model_copy(update={"health": settings.health.model_copy(
        update=FAST_HEALTH)})
    alsa_conf = tmp_path / "alsa.conf"
    write_alsa_conf(alsa_conf, work / "out.raw")
    env = {**notify.env(), "ALSA_CONFIG_PATH": f"{SYSTEM_ALSA_CONF}:{alsa_conf}"}
    with watch(mqtt_broker, "watch") as rec, daemon(settings, tmp_path / "agent.log",
                                                    env=env) as agent:
        notify.receive_until("READY", timeout=60)
        first = rec.wait_json(DEV.health, lambda h: h["state"] == "ok")
        assert_health_fields(first, voice="tiny-test", voice_dir=tiny_voice_dir)

        rec.publish(DEV.command("speak"), {"id": "one", "text": "Hello there. How are you?"})
        assert final_event(rec, "one")["event"] == "finished"
        rec.publish(DEV.command("ping"), {"id": "p1"})  # ping: a fresh report at once
        # The first report with a request counted (a periodic report may come out before the
        # request is recorded; the ping then forces a fresh one).
        served = health_after(rec, first["uptime_s"],
                              lambda h: h["requests"]["served"] + h["requests"]["failed"] > 0)
        requests = served["requests"]
        assert (requests["served"], requests["failed"]) == (1, 0)
        for figure in ("synthesis_s", "rtf", "first_audio_s"):
            assert set(requests[figure]) == {"p50", "p95"}
            assert 0 < requests[figure]["p50"] <= requests[figure]["p95"]
        assert served["audio"]["seconds_played"] > 0 and served["audio"]["state"] == "ok"
        assert (work / "out.raw").stat().st_size > 0

        # The output device disappears: the next utterance finds it missing.
        write_alsa_conf(alsa_conf, None)
        closed = served
        while closed["audio"]["device"] is not None:  # the idle device closes (keep_open_s)
            rec.publish(DEV.command("ping"), {})
            closed = health_after(rec, closed["uptime_s"])
        rec.publish(DEV.command("speak"), {"id": "two", "text": "Anybody there?"})
        failed = final_event(rec, "two")
        assert failed["event"] == "failed" and "ttsout" in failed["reason"]
        degraded = health_after(rec, closed["uptime_s"], lambda h: h["state"] != "ok")
        assert degraded["state"] == "degraded"
        assert degraded["reasons"][0].startswith("audio device unavailable: ")
        assert degraded["audio"]["state"] == "degraded"
        assert degraded["requests"]["failed"] == 1

        # It comes back: the player retries and the report is ok again, published at once.
        write_alsa_conf(alsa_conf, work / "out.raw")
        back = health_after(rec, degraded["uptime_s"], lambda h: h["state"] == "ok")
        assert back["audio"]["state"] == "ok" and back["reasons"] == []
        stop_gracefully(agent, notify)

    # Retained: a newcomer gets the last report at once.
    with Recorder(mqtt_broker.settings(), [DEV.health.as_filter()], "late") as late:
        retained = late.wait_json(DEV.health, lambda h: True, timeout=10)
    assert retained["device_id"] == "t1"


def test_an_audio_device_that_cannot_be_opened_degrades_from_the_start(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, notify: NotifySocket,
) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              audio={"device": "no_such_pcm_device"})
    settings = settings.model_copy(update={"health": settings.health.model_copy(
        update=FAST_HEALTH)})
    with watch(mqtt_broker, "watch") as rec, daemon(settings, tmp_path / "agent.log",
                                                    env=notify.env()) as agent:
        ready = notify.receive_until("READY", timeout=60)
        # The report that names the device (under load one may first say 'mqtt disconnected').
        degraded = rec.wait_json(DEV.health, lambda h: h["state"] == "degraded" and any(
            r.startswith("audio device unavailable: ") for r in h["reasons"]))
        assert degraded["reasons"] == [
            r for r in degraded["reasons"] if r.startswith("audio device unavailable: ")]
        assert "no_such_pcm_device" in degraded["reasons"][0]
        # The STATUS line says so too (possibly already in the READY message).
        statuses: list[str] = fields_of(ready, "STATUS")
        deadline = time.monotonic() + 30
        while not any(s.startswith("degraded: audio device unavailable") for s in statuses):
            assert time.monotonic() < deadline, statuses
            message = notify.receive(timeout=1)
            statuses += fields_of([message], "STATUS") if message is not None else []
        stop_gracefully(agent, notify)


@pytest.mark.voice
def test_the_real_voice_reports_its_figures(
    mqtt_broker: Broker, real_voice_dir: Path, tmp_path: Path, notify: NotifySocket,
) -> None:
    settings = agent_settings(mqtt_broker, real_voice_dir.parent, tmp_path / "agent",
                              voice=real_voice_dir.name)
    settings = settings.model_copy(update={"health": settings.health.model_copy(
        update=FAST_HEALTH)})
    with watch(mqtt_broker, "watch") as rec, daemon(settings, tmp_path / "agent.log",
                                                    env=notify.env()) as agent:
        notify.receive_until("READY", timeout=120)
        first = rec.wait_json(DEV.health, lambda h: h["state"] == "ok")
        assert_health_fields(first, voice=real_voice_dir.name, voice_dir=real_voice_dir)
        rec.publish(DEV.command("speak"), {"id": "joe", "text": "The health report is live."})
        assert final_event(rec, "joe", timeout=60)["event"] == "finished"
        rec.publish(DEV.command("ping"), {"id": "p"})
        report = health_after(rec, first["uptime_s"], lambda h: h["requests"]["served"] > 0)
        assert report["requests"]["served"] == 1
        assert report["requests"]["rtf"]["p50"] > 0
        assert report["voices"]["voices"][0]["sample_rate"] == 22050
        stop_gracefully(agent, notify)
    assert json.loads(json.dumps(report)) == report
