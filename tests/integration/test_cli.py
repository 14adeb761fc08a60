"""The command line as a user runs it: real processes, exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import wave
from pathlib import Path

import pytest

from tests.support.cli import agent_cli


def tts(*args: str, models: Path, stdin: str | None = None,
        default_voice: str = "tiny-test") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TTS_AGENT_MODELS__DIR": str(models),
           "TTS_AGENT_MODELS__DEFAULT_VOICE": default_voice, "TTS_AGENT_LOG__FORMAT": "json"}
    return agent_cli(*args, stdin=stdin, env=env, timeout=120)


def test_synth_writes_wav(tiny_voice_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.wav"
    result = tts("synth", "--text", "Hello there.", "--out", str(out), models=tiny_voice_dir.parent)
    assert result.returncode == 0, result.stderr
    with wave.open(str(out)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
        assert wav.getnframes() > 0


def test_synth_reads_stdin(tiny_voice_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.wav"
    result = tts("synth", "--out", str(out), models=tiny_voice_dir.parent, stdin="From stdin.")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["seconds"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["synth", "--text", "  ", "--out", "x.wav"], "text is empty"),
        (["synth", "--text", "hi", "--voice", "nope", "--out", "x.wav"], "no voice named 'nope'"),
        (["synth", "--text", "hi", "--length-scale", "99", "--out", "x.wav"], "--length-scale"),
        (["synth", "--text", "hi", "--out", "/nonexistent/dir/x.wav"], "cannot write"),
    ],
)
def test_errors_are_one_line_and_nonzero(tiny_voice_dir: Path, args: list[str],
                                         message: str) -> None:
    result = tts(*args, models=tiny_voice_dir.parent)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unreadable_model_is_a_clear_error(tiny_voice_dir: Path, tmp_path: Path) -> None:
    (tiny_voice_dir / "tiny-test.onnx").write_bytes(b"garbage")
    result = tts("synth", "--text", "hi", "--out", str(tmp_path / "x.wav"),
                 models=tiny_voice_dir.parent)
    assert result.returncode != 0
    assert "tiny-test.onnx" in result.stderr
    assert "Traceback" not in result.stderr


def test_voices_lists_installed(tiny_voice_dir: Path) -> None:
    result = tts("voices", "--json", models=tiny_voice_dir.parent)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows == [{"voice": "tiny-test", "version": "1.0.0", "sample_rate": 16000,
                     "variants": ["fp32"], "default": True, "current": True,
                     "staged": False}]


def test_phonemize_json_matches_engine_ids(tiny_voice_dir: Path) -> None:
    from agent.voice.voice import Voice

    result = tts("phonemize", "--text", "Hi, there. Bye!", "--json",
                 models=tiny_voice_dir.parent)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    voice = Voice.load(tiny_voice_dir)
    expected = [voice.frontend.ids(s) for s in voice.sentences("Hi, there. Bye!")]
    assert [s["ids"] for s in data["sentences"]] == expected
    assert [s["text"] for s in data["sentences"]] == ["Hi, there.", "Bye!"]
    assert data["sentences"][0]["phonemes"].endswith(".")


@pytest.mark.voice
def test_real_voice_synth_end_to_end(real_models_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.wav"
    result = tts("synth", "--text", "Welcome to the station.", "--out", str(out),
                 models=real_models_dir, default_voice="en_US-joe-medium")
    assert result.returncode == 0, result.stderr
    with wave.open(str(out)) as wav:
        assert (wav.getframerate(), wav.getnchannels()) == (22050, 1)
        assert 1.0 <= wav.getnframes() / 22050 <= 2.0
