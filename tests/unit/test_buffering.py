"""Whole-sentence buffering (agent.pipeline.buffering): the windows of a sentence joined into
one chunk with the same samples, and the choice between streaming and whole sentences."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.audio.format import AudioChunk
from agent.pipeline.buffering import SLOW_RTF, SentenceGather, choose_buffering
from agent.voice.voice import Voice


def window(value: int, frames: int, text: str = "", *, ends: bool) -> AudioChunk:
    return AudioChunk.from_float(np.full(frames, value / 10, np.float32), 16000, text,
                                 ends_sentence=ends)


def test_windows_of_a_sentence_become_one_chunk_with_the_same_samples() -> None:
    chunks = [window(1, 100, "First one.", ends=False), window(2, 200, ends=False),
              window(3, 300, ends=True), window(4, 50, "Second.", ends=True)]
    gather = SentenceGather()
    given = [gather.add(chunk) for chunk in chunks]
    assert given[:2] == [None, None]  # held until the sentence ends
    first, second = given[2], given[3]
    assert first is not None and second is chunks[3]
    assert first.text == "First one." and first.audio == b"".join(c.audio for c in chunks[:3])
    assert gather.flush() is None


def test_a_producer_that_stops_inside_a_sentence_still_gives_what_it_made() -> None:
    gather = SentenceGather()
    assert gather.add(window(1, 100, "Cut.", ends=False)) is None
    assert gather.add(window(2, 100, ends=False)) is None
    rest = gather.flush()
    assert rest is not None and rest.frames == 200 and rest.text == "Cut."


def test_the_setting_forces_a_mode_and_auto_follows_the_warm_up(tiny_voice_dir: Path) -> None:
    voice = Voice.load(tiny_voice_dir)
    assert choose_buffering(voice, "sentence").mode == "sentence"
    assert choose_buffering(voice, "stream").reason == "audio.buffering = 'stream'"
    rtf = voice.warmup_s / voice.warmup_audio_s
    auto = choose_buffering(voice, "auto")
    assert auto.mode == ("sentence" if rtf > SLOW_RTF else "stream")
    assert auto.realtime_factor == round(rtf, 3) and auto.voice == voice.name
    voice.warmup_s = voice.warmup_audio_s * 3  # as measured on a board 3x slower
    slow = choose_buffering(voice, "auto")
    assert slow.mode == "sentence" and "3.00x real time" in (slow.reason or "")
