"""The voice library's reports on a running agent, over a real Mosquitto with real playback:
a default voice refused at start-up (#15-8), a stale int8 variant and a damaged file the voice
does not serve (#19-3). The tiny generated voice; its second model stands in for int8."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.library.voices import VoiceLibrary
from agent.mqtt.topics import Namespace
from agent.voice.bundle import read_manifest, sha256_file, write_manifest
from tests.support import make_tiny_voice
from tests.support.broker import Broker, Recorder, agent_settings, running_agent

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

VOICE = make_tiny_voice.VOICE
FP32, INT8 = f"{VOICE}.onnx", f"{VOICE}.int8.onnx"
DEV = Namespace("tts").device("t1")

Start = Callable[..., tuple[AgentService, Recorder]]


@pytest.fixture()
def start(mqtt_broker: Broker, tmp_path: Path) -> Iterator[Start]:
    """Start an agent on a models dir (watching it), with a controller subscribed first, so
    that what the agent publishes while it starts is seen."""
    stack: list[Any] = []

    def start(models: Path, **models_settings: Any) -> tuple[AgentService, Recorder]:
        settings = agent_settings(mqtt_broker, models, tmp_path / "agent")
        settings = settings.model_copy(update={"models": settings.models.model_copy(update={
            "watch": True, "debounce_s": 0.3, "pending_timeout_s": 2.0, **models_settings})})
        controller = Recorder(mqtt_broker.settings(), [
            DEV.events.as_filter(), DEV.status.as_filter(), DEV.health.as_filter()],
            "controller")
        controller.__enter__()
        stack.append(controller)
        agent = running_agent(settings)
        service = agent.__enter__()
        stack.append(agent)
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        return service, controller

    yield start
    for item in reversed(stack):
        item.__exit__(None, None, None)


def speak(controller: Recorder, request_id: str) -> dict[str, Any]:
    controller.publish(DEV.command("speak"), {"id": request_id, "text": "Platform two."})
    return controller.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"])


def replace_file(source: Path, target: Path) -> None:
    """An updater's atomic rename: a hidden temporary file renamed over the target."""
    temporary = target.with_name(f".{target.name}.part")
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


def test_a_default_voice_refused_at_start_is_published_and_not_validated_per_request(
        start: Start, tiny_voice_dir: Path, tiny_models_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    good = tiny_models_dir / VOICE
    model = tiny_voice_dir / FP32
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x55  # same size, other bytes
    model.write_bytes(bytes(data))
    validations: list[str] = []
    validate = VoiceLibrary._validate

    def counting(self: VoiceLibrary, name: str, *args: Any) -> Any:
        validations.append(name)
        return validate(self, name, *args)

    monkeypatch.setattr(VoiceLibrary, "_validate", counting)
    _, controller = start(tiny_voice_dir.parent)
    rejected = controller.wait_json(DEV.events, lambda e: e["event"] == "model_rejected")
    assert rejected["voice"] == VOICE and "sha256" in rejected["reason"]
    health = controller.wait_json(
        DEV.health, lambda h: VOICE in h.get("voices", {}).get("last_reload", {}))
    assert health["voices"]["last_reload"][VOICE]["outcome"] == "rejected"
    assert health["state"] == "failing"
    # the first reason says what to fix: which voice, why, what is installed (#28 item 5)
    first = health["reasons"][0]
    assert first.startswith(f"no voice loaded: models.default_voice {VOICE!r} was rejected: ")
    assert "sha256" in first and first.endswith(f"(installed: {VOICE})"), first
    for number in range(3):
        final = speak(controller, f"broken-{number}")
        assert final["event"] == "failed" and "sha256" in final["reason"]
    assert validations == [VOICE]  # refused once, answered from the refusal since
    replace_file(good / FP32, model)  # the repair: the watcher validates the new files
    loaded = controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded")
    assert loaded["version"] == "1.0.0"
    assert speak(controller, "repaired")["event"] == "finished"
    assert validations == [VOICE, VOICE]
    assert [e["event"] for e in controller.json_on(DEV.events)
            if e["event"].startswith("model_")] == ["model_rejected", "model_loaded"]


def write(bundle: Path, version: str, derived: dict[str, Any]) -> None:
    write_manifest(bundle, voice=VOICE, version=version, sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": FP32, "int8": INT8}, config=f"{FP32}.json", source="test",
                   extra={"derived": derived})


@pytest.fixture()
def int8_bundle(tiny_voice_dir: Path) -> Path:
    """The tiny voice with an int8 variant whose source (the fp32 file) is recorded."""
    make_tiny_voice.build_model(tiny_voice_dir / INT8, gain=0.3)
    write(tiny_voice_dir, "1.0.0", {"int8": {"from": "fp32", "file": FP32,
                                             "sha256": sha256_file(tiny_voice_dir / FP32)}})
    return tiny_voice_dir


def test_a_stale_int8_falls_back_to_fp32_with_the_reason(
        start: Start, int8_bundle: Path, tmp_path: Path) -> None:
    _, controller = start(int8_bundle.parent, variant="int8")
    first = controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded")
    assert first["variant"] == "int8" and "variant_reason" not in first
    # An operator pushes a new fp32 model and its manifest; int8 is not rebuilt.
    make_tiny_voice.build_model(tmp_path / FP32, gain=0.7)
    staged = tmp_path / "manifest"
    staged.mkdir()
    shutil.copyfile(tmp_path / FP32, staged / FP32)
    for name in (INT8, f"{FP32}.json"):
        shutil.copyfile(int8_bundle / name, staged / name)
    write(staged, "1.1.0", read_manifest(int8_bundle)["derived"])
    replace_file(staged / FP32, int8_bundle / FP32)
    replace_file(staged / "manifest.json", int8_bundle / "manifest.json")
    loaded = controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded"
                                  and e["version"] == "1.1.0")
    assert loaded["variant"] == "fp32" and "int8 is stale" in loaded["variant_reason"]
    health = controller.wait_json(DEV.health, lambda h: h["voices"]["voices"]
                                  and h["voices"]["voices"][0]["version"] == "1.1.0")
    assert health["state"] == "degraded"
    assert any(r.startswith(f"voice {VOICE}: int8 is stale") for r in health["reasons"])
    final = speak(controller, "after-push")
    assert final["event"] == "finished" and final["version"] == "1.1.0"


def test_a_damaged_fp32_while_int8_serves_is_published(start: Start, int8_bundle: Path) -> None:
    service, controller = start(int8_bundle.parent, variant="int8")
    controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded")
    with (int8_bundle / FP32).open("r+b") as handle:
        handle.truncate(100)
    damaged = controller.wait_json(DEV.events, lambda e: e["event"] == "model_damaged")
    assert damaged["files"] == [FP32] and damaged["variant"] == "int8"
    assert "size 100" in damaged["reason"]
    health = controller.wait_json(DEV.health, lambda h: h["state"] == "degraded")
    assert any(FP32 in r and "not served" in r for r in health["reasons"])
    final = speak(controller, "still-int8")
    assert final["event"] == "finished"
    assert service.voices.get().variant == "int8"


def test_requantize_stale_rebuilds_int8_in_the_background(
        start: Start, tmp_path: Path) -> None:
    """``models.requantize_stale``: after a new fp32 is pushed, fp32 serves at once and a
    background ``tts-agent quantize`` (lowest CPU priority) rebuilds int8 from it; then the
    fresh int8 serves. The Piper-structured test voice, which the quantizer can quantize."""
    from agent.quantize.int8_bundle import build_int8_bundle
    from tests.support import quant_voice

    bundle = quant_voice.build_bundle(tmp_path / "models", hop=128)
    fp32 = bundle / f"{quant_voice.VOICE}.onnx"
    build_int8_bundle(fp32, bundle, calibration=["Welcome aboard the evening service."],
                      heldout=["The ferry leaves at noon."])
    _, controller = start(bundle.parent, default_voice=quant_voice.VOICE, variant="int8",
                          requantize_stale=True)
    first = controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded")
    assert first["variant"] == "int8"
    old = read_manifest(bundle)
    staged = tmp_path / "push"
    staged.mkdir()
    quant_voice.build_model(staged / fp32.name, hop=128, seed=8)  # the new fp32 model
    shutil.copyfile(bundle / old["config"], staged / old["config"])
    shutil.copyfile(bundle / old["variants"]["int8"], staged / old["variants"]["int8"])
    write_manifest(staged, voice=old["voice"], version="2.1.0", sample_rate=old["sample_rate"],
                   variants=old["variants"], config=old["config"], source="test",
                   extra={"derived": old["derived"]})
    replace_file(staged / fp32.name, fp32)
    replace_file(staged / "manifest.json", bundle / "manifest.json")
    stale = controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded"
                                 and e["version"] == "2.1.0", timeout=120)
    assert stale["variant"] == "fp32" and "int8 is stale" in stale["variant_reason"]
    fresh = controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded"
                                 and e["version"] == "2.1.0" and e["variant"] == "int8",
                                 timeout=600)
    assert "variant_reason" not in fresh
    assert read_manifest(bundle)["derived"]["int8"]["sha256"] == sha256_file(fp32)
    assert speak(controller, "fresh-int8")["event"] == "finished"


@pytest.mark.parametrize("fifo", [False, True], ids=["deleted", "fifo"])
def test_a_live_voice_without_its_manifest_keeps_serving_and_health_says_why(
        start: Start, tiny_voice_dir: Path, fifo: bool) -> None:
    """#27 item 3: the manifest of the live voice deleted (or replaced by a FIFO): speaks still
    finish with that voice, health is degraded naming it, and recovers when it is put back."""
    _, controller = start(tiny_voice_dir.parent)
    assert speak(controller, "s1")["event"] == "finished"
    manifest = tiny_voice_dir / "manifest.json"
    content = manifest.read_bytes()
    manifest.unlink()
    if fifo:
        os.mkfifo(manifest)
    rejected = controller.wait_json(DEV.events, lambda e: e["event"] == "model_rejected")
    assert "manifest.json" in rejected["reason"] and "still serving" in rejected["reason"]
    assert str(tiny_voice_dir) not in rejected["reason"]
    final = speak(controller, "s2")
    assert final["event"] == "finished" and final["voice"] == VOICE, final
    health = controller.wait_json(DEV.health, lambda h: h["state"] == "degraded")
    assert any(VOICE in r and "manifest.json" in r for r in health["reasons"]), health

    manifest.unlink(missing_ok=True)
    manifest.write_bytes(content)
    controller.wait_json(DEV.health, lambda h: not any(VOICE in r for r in h["reasons"]), 30)
    assert speak(controller, "s3")["event"] == "finished"
