"""``tts-agent say``: a real process speaking into an ALSA file PCM, no broker."""

from __future__ import annotations

import json
import os
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from agent.commands.say import DEVICE_HINT
from tests.support.alsa_sink import AlsaConfig, read_samples, trim_silence
from tests.support.cli import agent_cli

pytestmark = pytest.mark.alsa

TEXT = "Hello there. This is a second sentence."


def _tts(*args: str, models: Path, alsa: AlsaConfig,
         device: str = "spk") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TTS_AGENT_MODELS__DIR": str(models),
           "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", "TTS_AGENT_LOG__FORMAT": "json",
           "TTS_AGENT_AUDIO__DEVICE": device, "ALSA_CONFIG_PATH": str(alsa.path)}
    return agent_cli(*args, env=env, timeout=120)


def test_say_plays_exactly_what_synth_writes(tiny_voice_dir: Path, alsa: AlsaConfig,
                                             tmp_path: Path) -> None:
    out = alsa.add_file("spk")
    deterministic = ["--noise-scale", "0", "--noise-w", "0"]
    said = _tts("say", TEXT, *deterministic, models=tiny_voice_dir.parent, alsa=alsa)
    assert said.returncode == 0, said.stderr
    report = json.loads(said.stdout.splitlines()[-1])
    assert report["device"] == "spk"

    wav_path = tmp_path / "ref.wav"
    synth = _tts("synth", "--text", TEXT, "--out", str(wav_path), *deterministic,
                 models=tiny_voice_dir.parent, alsa=alsa)
    assert synth.returncode == 0, synth.stderr
    with wave.open(str(wav_path)) as wav:
        reference = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")

    played, _, trailing = trim_silence(read_samples(out)[:, 0])
    expected, _, _ = trim_silence(reference)
    assert len(expected) > 0
    # A null sink plays instantly, so silence may fill the wait for the next sentence;
    # apart from that, every sample arrives unchanged and in order.
    assert np.array_equal(played[played != 0], expected[expected != 0])
    assert len(played) >= len(expected)
    assert trailing > 0
    assert report["seconds"] == pytest.approx(len(reference) / 16000, abs=1e-3)


def test_say_reads_stdin_and_scales_volume(tiny_voice_dir: Path, alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    env_args = ["--noise-scale", "0", "--noise-w", "0"]
    loud = _tts("say", "Loud.", *env_args, models=tiny_voice_dir.parent, alsa=alsa)
    assert loud.returncode == 0, loud.stderr
    full, _, _ = trim_silence(read_samples(out)[:, 0])
    for path in [out, *out.parent.glob(out.name + ".*")]:
        path.unlink()

    result = agent_cli(
        "say", "--volume", "0.5", *env_args, stdin="Loud.", timeout=120,
        env={**os.environ, "TTS_AGENT_MODELS__DIR": str(tiny_voice_dir.parent),
             "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", "TTS_AGENT_AUDIO__DEVICE": "spk",
             "ALSA_CONFIG_PATH": str(alsa.path), "TTS_AGENT_LOG__FORMAT": "json"},
    )
    assert result.returncode == 0, result.stderr
    half = read_samples(out)[:, 0]
    half = half[np.flatnonzero(half)[0]:][: len(full)] if np.any(half) else half
    assert len(half) == len(full)
    assert np.max(np.abs(half.astype(int) - np.rint(full * 0.5).astype(int))) <= 1


def test_say_on_a_missing_device_fails_with_one_clear_line(tiny_voice_dir: Path,
                                                           alsa: AlsaConfig) -> None:
    result = _tts("say", "Anyone there?", models=tiny_voice_dir.parent, alsa=alsa,
                  device="nowhere")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("tts-agent say: error: playback failed on 'nowhere': cannot open "
                           "ALSA device 'nowhere': No such file or directory")
    assert line.endswith(DEVICE_HINT)
    # it fails fast: the device is tried before any voice loads (-v shows what was done)
    verbose = _tts("say", "-v", "Anyone there?", models=tiny_voice_dir.parent, alsa=alsa,
                   device="nowhere")
    assert verbose.returncode == 1
    lines = verbose.stderr.splitlines()
    assert lines[-1] == line
    events = [json.loads(entry)["event"] for entry in lines[:-1]]
    assert "audio_device_failed" in events
    assert "voice_loaded" not in events and "model_loaded" not in events
