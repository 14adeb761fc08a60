"""Model lifecycle on a running agent with the real voice: updates delivered the ways updaters
deliver them reload exactly once while speak commands keep finishing; broken models are rejected
and the old voice keeps speaking. Everything goes through a real Mosquitto and real playback."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import Namespace
from agent.voice.bundle import verify_bundle, write_manifest
from tests.support.broker import Broker, Recorder, agent_settings, running_agent

pytestmark = [pytest.mark.voice, pytest.mark.broker, pytest.mark.alsa]

VOICE = "en_US-joe-medium"
DEV = Namespace("tts").device("t1")
ONNX = f"{VOICE}.onnx"


@pytest.fixture(scope="module")
def versions(real_voice_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two complete bundles of the real voice, 1.0.0 and 2.0.0, whose model files differ only
    in an ONNX doc string (so their sha256 differ and a switch is a real reload)."""
    import onnx

    root = tmp_path_factory.mktemp("versions")
    source = verify_bundle(real_voice_dir)
    model = onnx.load(str(source.model_path("fp32")))
    for version in ("1.0.0", "2.0.0"):
        target = root / version
        target.mkdir()
        model.doc_string = f"test build {version}"
        onnx.save(model, str(target / ONNX))
        shutil.copyfile(source.config_path, target / f"{ONNX}.json")
        write_manifest(target, voice=VOICE, version=version, sample_rate=22050,
                       variants={"fp32": ONNX}, config=f"{ONNX}.json", source="test")
    return root


class Agent:
    def __init__(self, service: AgentService, controller: Recorder) -> None:
        self.service = service
        self.controller = controller
        self.sent: list[str] = []

    def speak(self, n: int) -> None:
        for _ in range(n):
            request_id = f"r{len(self.sent)}"
            self.sent.append(request_id)
            self.controller.publish(DEV.command("speak"),
                                    {"id": request_id, "text": "Attention please."})

    def model_events(self) -> list[dict[str, Any]]:
        return [e for e in self.controller.json_on(DEV.events)
                if e["event"] in ("model_loaded", "model_rejected")]

    def wait_model_event(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return self.controller.wait_json(
            DEV.events, lambda e: e["event"].startswith("model_") and predicate(e), timeout=60)

    def all_finished(self) -> list[str]:
        finals = {}
        for request_id in self.sent:
            final = self.controller.wait_json(
                DEV.events, lambda e, r=request_id: e["id"] == r and e["final"], timeout=120)
            finals[request_id] = final["event"]
        return sorted(set(finals.values()))


@pytest.fixture()
def start_agent(mqtt_broker: Broker, tmp_path: Path) -> Iterator[Callable[[Path], Agent]]:
    stack: list[Any] = []

    def start(models: Path) -> Agent:
        settings = agent_settings(mqtt_broker, models, tmp_path / "agent", voice=VOICE)
        settings = settings.model_copy(update={"models": settings.models.model_copy(
            # a half-written bundle waits at most 8 s before it is validated (and rejected)
            update={"watch": True, "debounce_s": 0.3, "pending_timeout_s": 8.0})})
        controller = Recorder(mqtt_broker.settings(), [DEV.events.as_filter(),
                                                       DEV.status.as_filter()], "controller")
        controller.__enter__()
        stack.append(controller)
        agent_cm = running_agent(settings)
        service = agent_cm.__enter__()
        stack.append(agent_cm)
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded")
        return Agent(service, controller)

    yield start
    for item in reversed(stack):
        item.__exit__(None, None, None)


def assert_reloaded_once(agent: Agent) -> None:
    """Every request finished, and the voice was loaded twice, 1.0.0 then 2.0.0, with no
    further reload a second later."""
    assert agent.all_finished() == ["finished"]
    time.sleep(1.0)
    assert [(e["event"], e["version"]) for e in agent.model_events()] == [
        ("model_loaded", "1.0.0"), ("model_loaded", "2.0.0")]


def flat(versions: Path, tmp_path: Path) -> Path:
    models = tmp_path / "models"
    shutil.copytree(versions / "1.0.0", models / VOICE)
    return models


def test_atomic_rename(versions: Path, tmp_path: Path,
                       start_agent: Callable[[Path], Agent]) -> None:
    models = flat(versions, tmp_path)
    agent = start_agent(models)
    agent.speak(3)
    for name in (ONNX, "manifest.json"):
        shutil.copyfile(versions / "2.0.0" / name, models / VOICE / f".{name}.part")
        os.replace(models / VOICE / f".{name}.part", models / VOICE / name)
    agent.speak(3)
    agent.wait_model_event(lambda e: e.get("version") == "2.0.0")
    agent.speak(2)
    assert_reloaded_once(agent)


def test_symlink_swap(versions: Path, tmp_path: Path,
                      start_agent: Callable[[Path], Agent]) -> None:
    voice_dir = tmp_path / "models" / VOICE
    voice_dir.mkdir(parents=True)
    for version in ("1.0.0", "2.0.0"):  # hard links: the only links a voice may hold are
        # current and previous, naming a version directory inside it (docs/voices.md)
        shutil.copytree(versions / version, voice_dir / version, copy_function=os.link)
    (voice_dir / "current").symlink_to("1.0.0")
    agent = start_agent(tmp_path / "models")
    agent.speak(3)
    (voice_dir / ".current.new").symlink_to("2.0.0")
    os.replace(voice_dir / ".current.new", voice_dir / "current")
    agent.speak(3)
    agent.wait_model_event(lambda e: e.get("version") == "2.0.0")
    assert_reloaded_once(agent)


def test_slow_in_place_copy(versions: Path, tmp_path: Path,
                            start_agent: Callable[[Path], Agent]) -> None:
    models = flat(versions, tmp_path)
    agent = start_agent(models)
    shutil.copyfile(versions / "2.0.0" / "manifest.json", models / VOICE / "manifest.json")
    data = (versions / "2.0.0" / ONNX).read_bytes()
    with (models / VOICE / ONNX).open("r+b") as handle:
        handle.truncate(0)
        step = len(data) // 8 + 1
        for offset in range(0, len(data), step):
            handle.write(data[offset:offset + step])
            handle.flush()
            agent.speak(1)
            time.sleep(0.2)
    agent.wait_model_event(lambda e: e.get("version") == "2.0.0")
    assert_reloaded_once(agent)


def truncate(bundle: Path, versions: Path) -> None:
    model = bundle / ONNX
    with model.open("r+b") as handle:
        handle.truncate(model.stat().st_size // 2)


def wrong_hash(bundle: Path, versions: Path) -> None:
    shutil.copyfile(versions / "2.0.0" / ONNX, bundle / ".x.part")  # same size, other bytes
    os.replace(bundle / ".x.part", bundle / ONNX)


def not_onnx(bundle: Path, versions: Path) -> None:
    (bundle / ONNX).write_bytes(b"<html>502 Bad Gateway</html>\n" * 100)
    write_manifest(bundle, voice=VOICE, version="3.0.0", sample_rate=22050,
                   variants={"fp32": ONNX}, config=f"{ONNX}.json", source="test")


def wrong_inputs(bundle: Path, versions: Path) -> None:
    import onnx

    model = onnx.load(str(bundle / ONNX))
    for node in model.graph.node:
        node.input[:] = ["tokens" if name == "input" else name for name in node.input]
    model.graph.input[0].name = "tokens"
    onnx.save(model, str(bundle / ONNX))
    write_manifest(bundle, voice=VOICE, version="3.0.0", sample_rate=22050,
                   variants={"fp32": ONNX}, config=f"{ONNX}.json", source="test")


@pytest.mark.parametrize(("damage", "reason"), [
    (truncate, "size"), (wrong_hash, "sha256"), (not_onnx, "onnxruntime cannot load"),
    (wrong_inputs, "lack"),
], ids=["truncated", "wrong-hash", "not-onnx", "wrong-inputs"])
def test_broken_model_is_rejected_and_the_old_voice_keeps_speaking(
    versions: Path, tmp_path: Path, start_agent: Callable[[Path], Agent],
    damage: Callable[[Path, Path], None], reason: str,
) -> None:
    models = flat(versions, tmp_path)
    agent = start_agent(models)
    agent.speak(2)
    damage(models / VOICE, versions)
    rejected = agent.wait_model_event(lambda e: e["event"] == "model_rejected")
    assert reason in rejected["reason"]
    agent.speak(3)
    assert agent.all_finished() == ["finished"]
    finals = [e for e in agent.controller.json_on(DEV.events) if e.get("final")]
    assert {e["version"] for e in finals} == {"1.0.0"}
    assert [e["event"] for e in agent.model_events()] == ["model_loaded", "model_rejected"]


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_reload_command_switches_version_and_rolls_back(
    versions: Path, tmp_path: Path, start_agent: Callable[[Path], Agent]
) -> None:
    from agent.cli import main

    voice_dir = tmp_path / "models" / VOICE
    voice_dir.mkdir(parents=True)
    for version in ("1.0.0", "2.0.0"):
        shutil.copytree(versions / version, voice_dir / version)
    (voice_dir / "current").symlink_to("1.0.0")
    agent = start_agent(tmp_path / "models")
    agent.controller.publish(DEV.command("reload"),
                             {"id": "up", "voice": VOICE, "version": "2.0.0"})
    final = agent.controller.wait_json(DEV.events, lambda e: e["id"] == "up" and e["final"])
    assert final["event"] == "done", final
    assert os.readlink(voice_dir / "current") == "2.0.0"
    assert os.readlink(voice_dir / "previous") == "1.0.0"
    agent.speak(1)
    assert agent.all_finished() == ["finished"]
    # The one-command rollback, from a shell on the device; the running agent follows it.
    assert main(["models", "rollback", VOICE, "--config", str(write_config(tmp_path))]) == 0
    assert os.readlink(voice_dir / "current") == "1.0.0"
    agent.wait_model_event(lambda e: e["event"] == "model_loaded" and e["version"] == "1.0.0"
                           and e.get("previous_version") == "2.0.0")
    assert agent.service.voices.get().version == "1.0.0"


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "cli.toml"
    config.write_text(f'[models]\ndir = "{tmp_path / "models"}"\ndefault_voice = "{VOICE}"\n'
                      f'[cache]\ndir = "{tmp_path / "cli-cache"}"\n', encoding="utf-8")
    return config


def test_config_only_update_is_not_served_from_the_phrase_cache(
    versions: Path, tmp_path: Path, start_agent: Callable[[Path], Agent]
) -> None:
    """#15-6: a phrase cached under the old config is not played after a config-only update
    (length_scale 1 -> 2, new version, the model file unchanged): it is synthesized anew,
    slower, and cached under the new config."""
    import json

    models = flat(versions, tmp_path)
    bundle = models / VOICE
    agent = start_agent(models)

    def audio_s(request_id: str) -> float:
        agent.controller.publish(DEV.command("speak"),
                                 {"id": request_id, "text": "Attention please."})
        final = agent.controller.wait_json(
            DEV.events, lambda e: e["id"] == request_id and e["final"], timeout=120)
        assert final["event"] == "finished", final
        return float(final["audio_s"])

    before = audio_s("old-1")
    assert audio_s("old-2") == before
    cache = agent.service.phrase_cache
    assert cache is not None and cache.stats()["hits"] == 1  # the repeat came from the cache
    config = json.loads((bundle / f"{ONNX}.json").read_text(encoding="utf-8"))
    assert config["inference"]["length_scale"] == 1
    config["inference"]["length_scale"] = 2.0
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / f"{ONNX}.json").write_text(json.dumps(config), encoding="utf-8")
    os.link(bundle / ONNX, staged / ONNX)
    write_manifest(staged, voice=VOICE, version="1.1.0", sample_rate=22050,
                   variants={"fp32": ONNX}, config=f"{ONNX}.json", source="test")
    for name in (f"{ONNX}.json", "manifest.json"):
        shutil.copyfile(staged / name, bundle / f".{name}.part")
        os.replace(bundle / f".{name}.part", bundle / name)
    agent.wait_model_event(lambda e: e.get("version") == "1.1.0")
    after = audio_s("new-1")
    assert after > 1.5 * before  # twice as slow, not the cached old audio
    assert audio_s("new-2") == after
    assert cache.stats()["hits"] == 2
