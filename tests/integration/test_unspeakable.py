"""Text the voice cannot speak (#16), end to end over a real Mosquitto with real playback into an
ALSA file PCM: a script the voice cannot read is ``rejected`` naming it and the voices that can,
nothing played; a request naming such a voice is spoken; emoji alone have nothing to speak."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import Namespace
from tests.support import make_tiny_voice
from tests.support.broker import Recorder
from tests.support.controller import agent_fixture, controller_fixture, final_for, kinds_for

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
CHINESE = "你好，欢迎光临。"


def add_chinese_voice(models: Path) -> None:
    """A copy of the tiny voice that says it is Mandarin (``language.code`` zh_CN, espeak-ng's
    ``cmn``): what an installed Chinese Piper voice declares."""
    make_tiny_voice.copy_in_language(models, "tiny-zh", espeak="cmn", code="zh_CN",
                                     source="tests/integration/test_unspeakable.py")


agent = agent_fixture(prepare=add_chinese_voice)
controller = controller_fixture()


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
    assert kinds_for(controller, "zh-1") == ["rejected"]  # never accepted, never started
    assert audio_bytes(agent) == 0  # nothing was played
    # the agent keeps serving, and the same text to a voice that can say it is spoken
    controller.publish(DEV.command("speak"), {"id": "zh-2", "text": CHINESE, "voice": "tiny-zh"})
    assert final_for(controller, "zh-2")["event"] == "finished"
    assert kinds_for(controller, "zh-2") == ["accepted", "started", "finished"]
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


def test_one_symbol_or_word_of_another_script_is_spoken(agent: AgentService,
                                                        controller: Recorder) -> None:
    """#29: a Greek mu as a unit, or one foreign word, no longer refuses the announcement (the
    word is skipped); text mostly in that script still is."""
    controller.publish(DEV.command("speak"),
                       {"id": "dose", "text": "Give 250 μg twice daily, says the 欢迎 desk."})
    assert final_for(controller, "dose")["event"] == "finished"
    assert kinds_for(controller, "dose") == ["accepted", "started", "finished"]
    controller.publish(DEV.command("speak"), {"id": "most", "text": "Welcome 欢迎光临你好"})
    assert final_for(controller, "most")["event"] == "rejected"
