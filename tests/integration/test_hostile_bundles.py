"""Hostile bundles against the running agent (#15 items 1, 4 and 7): the agent is
``python -m agent run`` with a real Mosquitto, playback into an ALSA ``file`` PCM and a stand-in
for systemd's notify socket. A FIFO or a link to ``/dev/zero`` as the model, at start or dropped
into a live voice, and an oversize sparse model: the agent becomes ready, reports the refusal
with its reason, keeps the old voice, loads a later valid update, and exits on SIGTERM.
The real voice's config with another sample rate is refused at its warm-up."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import Namespace
from agent.voice.bundle import write_manifest
from agent.voice.options import VoiceOptions
from agent.voice.voice import Voice, VoiceLoadError
from tests.support import make_tiny_voice
from tests.support.broker import Broker, Recorder, agent_settings, daemon
from tests.support.notify_socket import NotifySocket

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
VOICE = make_tiny_voice.VOICE
MODEL = f"{VOICE}.onnx"
FAST_HEALTH = {"state_check_s": 0.5, "interval_s": 3600}


def set_model_entry(bundle: Path, *, size: int, sha256: str, version: str) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"][MODEL] = {"sha256": sha256, "size": size}
    manifest["version"] = version
    tmp = bundle / ".manifest.tmp"
    tmp.write_text(json.dumps(manifest))
    os.replace(tmp, path)


def fifo(bundle: Path) -> str:
    (bundle / MODEL).unlink()
    os.mkfifo(bundle / MODEL)
    set_model_entry(bundle, size=0, sha256=hashlib.sha256(b"").hexdigest(), version="6.6.6")
    return "FIFO"


def dev_zero(bundle: Path) -> str:
    (bundle / MODEL).unlink()
    (bundle / MODEL).symlink_to("/dev/zero")
    set_model_entry(bundle, size=0, sha256=hashlib.sha256(b"").hexdigest(), version="6.6.6")
    return "symbolic link"


def oversize(bundle: Path) -> str:
    """A sparse model of 3 GiB (above the default models.max_model_bytes), its manifest entry
    matching the size."""
    (bundle / MODEL).unlink()
    with (bundle / MODEL).open("wb") as handle:
        os.truncate(handle.fileno(), 3 << 30)
    set_model_entry(bundle, size=3 << 30, sha256="0" * 64, version="6.6.6")
    return "above the limit"


def deep_manifest(bundle: Path) -> str:
    """#27: 2 KB of 1,000 nested ``[`` (a RecursionError for an unbounded parser)."""
    (bundle / ".manifest.tmp").write_bytes(b"[" * 1000 + b"]" * 1000)
    os.replace(bundle / ".manifest.tmp", bundle / "manifest.json")
    return "unreadable manifest: nested too deeply"


def deep_config(bundle: Path) -> str:
    """#27: the voice config nested 1,000 deep, its manifest entry matching it."""
    config = bundle / f"{MODEL}.json"
    deep = b"[" * 1000 + b"]" * 1000
    (bundle / ".config.tmp").write_bytes(deep)
    os.replace(bundle / ".config.tmp", config)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"][config.name] = {"sha256": hashlib.sha256(deep).hexdigest(),
                                      "size": len(deep)}
    manifest["version"] = "6.6.6"
    (bundle / ".manifest.tmp").write_text(json.dumps(manifest))
    os.replace(bundle / ".manifest.tmp", bundle / "manifest.json")
    return "unreadable voice config: nested too deeply"


HOSTILE: dict[str, Callable[[Path], str]] = {"fifo": fifo, "dev-zero": dev_zero,
                                             "oversize": oversize, "deep-manifest": deep_manifest,
                                             "deep-config": deep_config}


def settings_for(broker: Broker, models: Path, work: Path, *, watch: bool) -> Any:
    settings = agent_settings(broker, models, work)
    return settings.model_copy(update={
        "health": settings.health.model_copy(update=FAST_HEALTH),
        "models": settings.models.model_copy(update={"watch": watch, "debounce_s": 0.3,
                                                      "pending_timeout_s": 5.0}),
    })


def recorder(broker: Broker) -> Recorder:
    return Recorder(broker.settings(), [DEV.health.as_filter(), DEV.events.as_filter(),
                                        DEV.status.as_filter()], "controller")


def stop(process: subprocess.Popen[bytes], notify: NotifySocket) -> None:
    process.send_signal(signal.SIGTERM)
    notify.receive_until("STOPPING", timeout=30)
    assert process.wait(60) == 0


def health_with(rec: Recorder, ping: str,
                predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """A health report (a ping makes the agent publish a fresh one) satisfying ``predicate``."""
    rec.publish(DEV.command("ping"), {"id": ping})
    return rec.wait_json(DEV.health, predicate, timeout=60)


@pytest.mark.parametrize("hostile", ["fifo", "dev-zero", "deep-manifest", "deep-config"])
def test_a_hostile_default_voice_at_start(mqtt_broker: Broker, tiny_voice_dir: Path,
                                          tmp_path: Path, notify: NotifySocket,
                                          hostile: str) -> None:
    reason = HOSTILE[hostile](tiny_voice_dir)
    settings = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", watch=False)
    with recorder(mqtt_broker) as rec, daemon(settings, tmp_path / "agent.log",
                                              env=notify.env()) as agent:
        ready = notify.receive_until("READY", timeout=90)[-1]
        assert ready.fields["STATUS"].startswith("failing"), ready.fields
        rec.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=30)
        rec.publish(DEV.command("speak"), {"id": "s1", "text": "Hello there."})
        final = rec.wait_json(DEV.events, lambda e: e["id"] == "s1" and e["final"], timeout=60)
        assert final["event"] == "failed" and reason in json.dumps(final), final
        health = health_with(rec, "p1", lambda h: h["state"] == "failing")
        assert not health["voices"]["voices"]
        stop(agent, notify)
    assert reason in (tmp_path / "agent.log").read_text(encoding="utf-8")


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_hostile_update_of_a_live_voice(mqtt_broker: Broker, tiny_voice_dir: Path,
                                          tmp_path: Path, notify: NotifySocket,
                                          hostile: str) -> None:
    settings = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", watch=True)
    saved = tmp_path / "saved"
    shutil.copytree(tiny_voice_dir, saved)
    with recorder(mqtt_broker) as rec, daemon(settings, tmp_path / "agent.log",
                                              env=notify.env()) as agent:
        notify.receive_until("READY", timeout=90)
        rec.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=30)
        reason = HOSTILE[hostile](tiny_voice_dir)
        rejected = rec.wait_json(DEV.events, lambda e: e["event"] == "model_rejected",
                                 timeout=60)
        assert reason in rejected["reason"] and "\n" not in rejected["reason"], rejected
        health = health_with(rec, "p1", lambda h: h["voices"]["last_reload"].get(VOICE, {})
                             .get("outcome") == "rejected")
        assert [v["version"] for v in health["voices"]["voices"]] == ["1.0.0"]
        rec.publish(DEV.command("speak"), {"id": "s1", "text": "Still speaking."})
        final = rec.wait_json(DEV.events, lambda e: e["id"] == "s1" and e["final"], timeout=60)
        assert final["event"] == "finished"
        # a later valid update is not held up by the hostile one
        (tiny_voice_dir / MODEL).unlink()
        shutil.copyfile(saved / MODEL, tiny_voice_dir / ".model.tmp")
        os.replace(tiny_voice_dir / ".model.tmp", tiny_voice_dir / MODEL)
        make_tiny_voice.build_bundle(tmp_path / "v2", version="2.0.0", gain=0.4)
        for name in (MODEL, f"{MODEL}.json", "manifest.json"):
            shutil.copyfile(tmp_path / "v2" / VOICE / name, tiny_voice_dir / f".{name}.tmp")
            os.replace(tiny_voice_dir / f".{name}.tmp", tiny_voice_dir / name)
        rec.wait_json(DEV.events, lambda e: e["event"] == "model_loaded"
                      and e.get("version") == "2.0.0", timeout=60)
        stop(agent, notify)


@pytest.mark.voice
@pytest.mark.parametrize("rate", [8000, 48000])
def test_the_real_voice_with_another_sample_rate_is_refused(real_voice_dir: Path,
                                                            tmp_path: Path, rate: int) -> None:
    """Both files agree on the rate, inside 8000..48000 Hz, but the model speaks at 22050 Hz:
    the warm-up's phonemes last implausibly long (8000) or short (48000) at that rate."""
    bundle = tmp_path / real_voice_dir.name
    bundle.mkdir()
    onnx_name = f"{real_voice_dir.name}.onnx"
    shutil.copyfile(real_voice_dir / onnx_name, bundle / onnx_name)
    config = json.loads((real_voice_dir / f"{onnx_name}.json").read_text(encoding="utf-8"))
    config["audio"]["sample_rate"] = rate
    (bundle / f"{onnx_name}.json").write_text(json.dumps(config), encoding="utf-8")
    write_manifest(bundle, voice=real_voice_dir.name, version="9.0.0", sample_rate=rate,
                   variants={"fp32": onnx_name}, config=f"{onnx_name}.json", source="test")
    with pytest.raises(VoiceLoadError, match=rf"the model speaks at about .* not {rate}"):
        Voice.load(bundle, VoiceOptions(stream_first_frames=0))
    config["audio"]["sample_rate"] = 22050  # the control: the right rate loads
    (bundle / f"{onnx_name}.json").write_text(json.dumps(config), encoding="utf-8")
    write_manifest(bundle, voice=real_voice_dir.name, version="9.0.1", sample_rate=22050,
                   variants={"fp32": onnx_name}, config=f"{onnx_name}.json", source="test")
    assert Voice.load(bundle, VoiceOptions(stream_first_frames=0)).sample_rate == 22050
