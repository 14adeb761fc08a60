"""A board that synthesizes slower than real time: speech late, never chopped (#19 item 5).

The voice is the Piper-structured test voice slowed in its decoder (tests/support/slow_voice.py:
every run that makes audio takes twice that audio's length), run by a real agent over a real
Mosquitto, played through real alsa-lib into an ALSA file PCM. Its first sentence streams in
decoder windows; the player used to play each window as it came and fill the wait for the next
with silence, inside the sentence. Now the warm-up's speed makes the worker hand each sentence
over whole: the file holds one burst of speech per sentence, and health says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.mqtt.topics import Namespace
from agent.settings import Settings
from tests.support import quant_voice, slow_voice
from tests.support.alsa_sink import read_samples
from tests.support.broker import Broker, Recorder, agent_settings, running_agent

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
TEXT = ("Tickets are sold at the green machines near the main entrance. "
        "Thank you for travelling with us today.")
SENTENCES = 2
GAP_S = 0.01
"""Silence at least this long separates two bursts; the test voice's speech never holds a run of
exact zeros this long (it is noise-like), the player's waiting silence always does."""
SLOWER = 2.0
"""The slow voice takes this many seconds per second of audio it decodes."""


def bursts(samples: np.ndarray, rate: int, gap_s: float = GAP_S) -> list[tuple[float, float]]:
    """(start, length) in seconds of each run of sound separated by at least ``gap_s`` of
    exact silence."""
    loud = np.flatnonzero(np.any(samples.reshape(len(samples), -1) != 0, axis=1))
    if not len(loud):
        return []
    breaks = np.flatnonzero(np.diff(loud) > gap_s * rate)
    starts = [loud[0], *loud[breaks + 1]]
    ends = [*loud[breaks], loud[-1]]
    return [(round(float(a) / rate, 3), round(float(b - a + 1) / rate, 3))
            for a, b in zip(starts, ends, strict=True)]


def settings_for(broker: Broker, models: Path, work: Path, **audio: Any) -> Settings:
    """An agent of its own (device id = ``work``'s name) speaking the slow voice into
    ``work``/out.raw."""
    settings = agent_settings(broker, models, work, device_id=work.name, voice=slow_voice.VOICE,
                              audio=audio)
    # First windows of 8 frames (128 ms at this voice's hop): the first sentence streams in
    # several windows, as the real voice's does.
    return settings.model_copy(update={"synthesis": settings.synthesis.model_copy(
        update={"stream_first_frames": 8})})


@pytest.fixture()
def models(tmp_path: Path) -> Path:
    models = tmp_path / "models"
    slow_voice.build_bundle(models)
    return models


def speak(settings: Settings, broker: Broker) -> tuple[dict[str, Any], dict[str, Any]]:
    """Speak :data:`TEXT` on a running agent; (its final event, the health report after it)."""
    dev = NS.device(settings.device_id)
    with running_agent(settings) as service, \
            Recorder(broker.settings(), [dev.events.as_filter(), dev.status.as_filter(),
                                         dev.health.as_filter()], "controller") as recorder:
        recorder.wait_json(dev.status, lambda p: p["state"] == "online")
        assert service.voices.get(None).window_plan is not None  # the first sentence streams
        recorder.publish(dev.command("speak"), {"id": "slow-1", "text": TEXT})
        final = recorder.wait_json(dev.events, lambda e: e["id"] == "slow-1" and e["final"], 120)
        recorder.publish(dev.command("ping"), {"id": "ping-1"})
        health = recorder.wait_json(dev.health, lambda h: h["audio"]["finished"] >= 1, 60)
    return final, health


def test_a_voice_slower_than_real_time_plays_each_sentence_in_one_burst(
        mqtt_broker: Broker, models: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    slow_voice.slow_down(monkeypatch, SLOWER)
    settings = settings_for(mqtt_broker, models, tmp_path / "agent")
    final, health = speak(settings, mqtt_broker)
    assert final["event"] == "finished"
    played = bursts(read_samples(tmp_path / "agent" / "out.raw"), quant_voice.SAMPLE_RATE)
    assert len(played) == SENTENCES, played  # late, but no sentence cut into pieces
    assert sum(length for _, length in played) == pytest.approx(final["audio_s"], abs=0.05)
    audio = health["audio"]
    assert audio["buffering"] == "sentence"
    assert "slower than it plays" in audio["buffering_reason"]
    assert audio["underruns"] == 0


def test_a_voice_faster_than_real_time_still_streams(mqtt_broker: Broker, models: Path,
                                                    tmp_path: Path) -> None:
    fast = settings_for(mqtt_broker, models, tmp_path / "fast")
    final, health = speak(fast, mqtt_broker)
    assert final["event"] == "finished"
    assert health["audio"]["buffering"] == "stream"
    assert "x real time" in health["audio"]["buffering_reason"]


def test_audio_buffering_overrides_the_warm_up(mqtt_broker: Broker, models: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    forced = settings_for(mqtt_broker, models, tmp_path / "forced", buffering="sentence")
    final, health = speak(forced, mqtt_broker)  # a fast voice, whole sentences all the same
    assert final["event"] == "finished"
    assert health["audio"]["buffering"] == "sentence"
    assert health["audio"]["buffering_reason"] == "audio.buffering = 'sentence'"
    played = bursts(read_samples(tmp_path / "forced" / "out.raw"), quant_voice.SAMPLE_RATE)
    assert 1 <= len(played) <= SENTENCES, played  # the next sentence may follow without a gap
    slow_voice.slow_down(monkeypatch, SLOWER)
    streamed = settings_for(mqtt_broker, models, tmp_path / "streamed", buffering="stream")
    final, health = speak(streamed, mqtt_broker)  # a slow voice made to stream: chopped
    assert final["event"] == "finished" and health["audio"]["buffering"] == "stream"
    played = bursts(read_samples(tmp_path / "streamed" / "out.raw"), quant_voice.SAMPLE_RATE)
    assert len(played) > SENTENCES, played
