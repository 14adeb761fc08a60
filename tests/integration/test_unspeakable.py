"""Text the voice cannot speak (#16), end to end over a real Mosquitto with real playback into an
ALSA file PCM: a script the voice cannot read is ``rejected`` naming it and the voices that can,
nothing played; a request naming such a voice is spoken; emoji alone have nothing to speak."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import Namespace
from agent.service import AgentService
from agent.voice.bundle import write_manifest
from tests.support import make_tiny_voice
from tests.support.broker import Broker, Recorder, agent_settings, running_agent

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
CHINESE = "你好，欢迎光临。"


def add_chinese_voice(models: Path) -> None:
    """A copy of the tiny voice that says it is Mandarin (``language.code`` zh_CN, espeak-ng's
    ``cmn``): what an installed Chinese Piper voice declares."""
    bundle = models / "tiny-zh"
    shutil.copytree(models / make_tiny_voice.VOICE, bundle)
    config_path = bundle / f"{make_tiny_voice.VOICE}.onnx.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["espeak"] = {"voice": "cmn"}
    config["language"] = {"code": "zh_CN", "family": "zh"}
    config_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    (bundle / "manifest.json").unlink()
    write_manifest(bundle, voice="tiny-zh", version="1.0.0",
                   sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": f"{make_tiny_voice.VOICE}.onnx"},
                   config=config_path.name, source="tests/integration/test_unspeakable.py")


@pytest.fixture()
def agent(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Iterator[AgentService]:
    add_chinese_voice(tiny_voice_dir.parent)
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    with running_agent(settings) as service:
        yield service


@pytest.fixture()
def controller(mqtt_broker: Broker, agent: AgentService) -> Iterator[Recorder]:
    with Recorder(mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
                  "controller") as recorder:
        recorder.wait_json(DEV.status, lambda p: p["state"] == "online")
        yield recorder


def final_for(recorder: Recorder, request_id: str) -> dict[str, Any]:
    return recorder.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"], 60)


def kinds(recorder: Recorder, request_id: str) -> list[str]:
    return [e["event"] for e in recorder.json_on(DEV.events) if e.get("id") == request_id]


def audio_bytes(service: AgentService) -> int:
    path = Path(service.settings.audio.device.split("'")[1])
    return path.stat().st_size if path.exists() else 0


def test_chinese_to_the_english_voice_is_rejected_naming_the_script(
        agent: AgentService, controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"id": "zh-1", "text": CHINESE})
    final = final_for(controller, "zh-1")
    assert final["event"] == "rejected", final
    assert final["reason"] == ("text is in Han script, which voice tiny-test (en-us) cannot "
                               "speak; installed voices that can: tiny-zh")
    assert kinds(controller, "zh-1") == ["rejected"]  # never accepted, never started
    assert audio_bytes(agent) == 0  # nothing was played
    # the agent keeps serving, and the same text to a voice that can say it is spoken
    controller.publish(DEV.command("speak"), {"id": "zh-2", "text": CHINESE, "voice": "tiny-zh"})
    assert final_for(controller, "zh-2")["event"] == "finished"
    assert kinds(controller, "zh-2") == ["accepted", "started", "finished"]
    assert audio_bytes(agent) > 0


def test_mixed_scripts_and_emoji(agent: AgentService, controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"id": "mix", "text": "Next stop: Москва 東京."})
    final = final_for(controller, "mix")
    assert final["event"] == "rejected"
    assert final["reason"].startswith("text is in Cyrillic script and Han script, which voice "
                                      "tiny-test")
    assert final["reason"].endswith("installed voices that can: none")
    controller.publish(DEV.command("speak"),
                       {"id": "emoji", "text": "\U0001f389\U0001f44d\U0001f3fd"})
    final = final_for(controller, "emoji")
    assert (final["event"], final["reason"]) == ("rejected", "text has nothing to speak")
    controller.publish(DEV.command("speak"), {"id": "party", "text": "Party \U0001f389 time!"})
    assert final_for(controller, "party")["event"] == "finished"
