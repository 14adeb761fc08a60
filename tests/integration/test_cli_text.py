"""The command line and the text stages (#16): say and synth refuse text the voice cannot speak
(exit 2, one line, nothing played or written), and phonemize shows what the voice is fed: the
normalizer's words, emoji dropped. Real processes, the tiny voice, an ALSA file PCM for say."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.alsa_sink import AlsaConfig
from tests.support.cli import agent_cli

CHINESE = "你好，欢迎光临。"
HAN = ("text is in Han script, which voice tiny-test (en-us) cannot speak; installed voices "
       "that can: none")


def tts(*args: str, models: Path, alsa: AlsaConfig | None = None,
        **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "TTS_AGENT_MODELS__DIR": str(models),
               "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", "TTS_AGENT_LOG__FORMAT": "json",
               **env}
    if alsa is not None:
        environ |= {"TTS_AGENT_AUDIO__DEVICE": "spk", "ALSA_CONFIG_PATH": str(alsa.path)}
    return agent_cli(*args, env=environ, timeout=120)


@pytest.mark.alsa
def test_say_refuses_chinese_for_the_english_voice(tiny_voice_dir: Path,
                                                   alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    result = tts("say", CHINESE, models=tiny_voice_dir.parent, alsa=alsa)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().endswith(HAN)
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not out.exists() or out.stat().st_size == 0  # nothing played


@pytest.mark.parametrize(("args", "message"), [
    (["synth", "--text", CHINESE], HAN),
    (["synth", "--ssml", "--text", f"<speak>Next: {CHINESE}</speak>"], HAN),
    (["synth", "--text", "\U0001f389\U0001f389"], "text has nothing to speak"),
    (["phonemize", "--text", CHINESE], HAN),
])
def test_synth_and_phonemize_refuse_it(tiny_voice_dir: Path, tmp_path: Path, args: list[str],
                                       message: str) -> None:
    wav = tmp_path / "o.wav"
    extra = ["--out", str(wav)] if args[0] == "synth" else []
    result = tts(*args, *extra, models=tiny_voice_dir.parent)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().endswith(message)
    assert not wav.exists()


@pytest.mark.slow
def test_phonemize_shows_the_normalized_words(tiny_voice_dir: Path) -> None:
    def phonemes(text: str, **env: str) -> str:
        result = tts("phonemize", "--json", "--text", text, models=tiny_voice_dir.parent, **env)
        assert result.returncode == 0, result.stderr
        return " ".join(s["phonemes"] for s in json.loads(result.stdout)["sentences"])

    assert phonemes("It costs $12.50.") == phonemes("It costs twelve dollars and fifty cents.")
    assert phonemes("Party \U0001f389 time!") == phonemes("Party time!")
    # the settings turn the stages off: espeak-ng reads the text as written
    raw = phonemes("It costs $12.50.", TTS_AGENT_TEXT__NORMALIZE="false")
    assert raw != phonemes("It costs twelve dollars and fifty cents.")
    named = phonemes("Party \U0001f389 time!", TTS_AGENT_TEXT__SYMBOLS="espeak")
    assert named != phonemes("Party time!")


def test_synth_speaks_a_chinese_voice(tiny_voice_dir: Path, tmp_path: Path) -> None:
    from tests.integration.test_unspeakable import add_chinese_voice

    add_chinese_voice(tiny_voice_dir.parent)
    result = tts("synth", "--voice", "tiny-zh", "--text", CHINESE, "--out",
                 str(tmp_path / "zh.wav"), models=tiny_voice_dir.parent)
    assert result.returncode == 0, result.stderr
    refused = tts("synth", "--text", CHINESE, "--out", str(tmp_path / "en.wav"),
                  models=tiny_voice_dir.parent)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("installed voices that can: tiny-zh")


@pytest.mark.voice
def test_the_real_english_voice_refuses_chinese(real_models_dir: Path, tmp_path: Path) -> None:
    result = tts("synth", "--text", CHINESE, "--out", str(tmp_path / "o.wav"),
                 models=real_models_dir, TTS_AGENT_MODELS__DEFAULT_VOICE="en_US-joe-medium")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().endswith(
        "text is in Han script, which voice en_US-joe-medium (en_US) cannot speak; installed "
        "voices that can: none")
    assert not (tmp_path / "o.wav").exists()
