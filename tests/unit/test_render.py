"""Rendering a document (agent.pipeline.render): speech per voice with rate and volume, pauses
as exact silence, chimes as their samples, errors before the first chunk, one cache entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent.audio.format import AudioChunk, AudioFormat
from agent.pipeline.jobs import SpeakRequest
from agent.pipeline.phrase_cache import PhraseCache
from agent.pipeline.render import NoChimes, render, request_document
from agent.text.document import Document, Pause, Phonemes, Sound, Speech, plain
from agent.text.frontend import TextError
from agent.voice.options import VoiceOptions
from agent.voice.voice import SynthesisParams, Voice

QUIET = SynthesisParams(noise_scale=0.0, noise_w=0.0)


class Voices:
    """A voice source of loaded voices by name (the first is the default)."""

    def __init__(self, *voices: Voice) -> None:
        self.voices = {v.name: v for v in voices}
        self.default = voices[0]

    def get(self, name: str | None = None) -> Voice:
        if name is None:
            return self.default
        try:
            return self.voices[name]
        except KeyError:
            raise LookupError(f"unknown voice {name!r}") from None


class Chimes:
    def __init__(self, **chimes: AudioChunk) -> None:
        self.chimes = chimes

    def get(self, name: str) -> AudioChunk:
        try:
            return self.chimes[name]
        except KeyError:
            raise ValueError(f"unknown chime {name!r}") from None


def tone(rate: int, frames: int, channels: int = 1) -> AudioChunk:
    t = np.arange(frames) / rate
    wave = (0.5 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    data = np.repeat(wave[:, None], channels, axis=1)
    return AudioChunk(data.tobytes(), AudioFormat(rate=rate, channels=channels))


@pytest.fixture()
def voice(tiny_voice_dir: Path) -> Voice:
    return Voice.load(tiny_voice_dir)


def request(text: str = "x", **fields: object) -> SpeakRequest:
    return SpeakRequest(text, params=QUIET, **fields)  # type: ignore[arg-type]


def pcm(chunks: Iterator[AudioChunk] | list[AudioChunk]) -> bytes:
    return b"".join(c.audio for c in chunks)


def test_plain_text_is_what_the_voice_says(voice: Voice) -> None:
    rendered = render(plain("Hello there."), Voices(voice), request())
    assert pcm(rendered.chunks) == pcm(voice.synthesize("Hello there.", QUIET))
    assert rendered.voice is voice and rendered.format == AudioFormat(rate=voice.sample_rate)


def test_a_pause_is_sample_exact_silence_between_the_parts(voice: Voice) -> None:
    doc = Document((Speech(("One.",)), Pause(0.3337), Speech(("Two.",))))
    chunks = list(render(doc, Voices(voice), request()).chunks)
    one = pcm(voice.synthesize("One.", QUIET))
    two = pcm(voice.synthesize("Two.", QUIET))
    gap = round(0.3337 * voice.sample_rate)
    assert pcm(chunks) == one + bytes(2 * gap) + two
    assert [c.frames for c in chunks if not any(c.audio)] == [gap]


def test_a_pause_replaces_the_sentence_silence_before_it(tiny_voice_dir: Path) -> None:
    voice = Voice.load(tiny_voice_dir, VoiceOptions(sentence_silence_s=0.25))
    silence = round(0.25 * voice.sample_rate)
    one = pcm(voice.synthesize("One.", QUIET))
    assert one.endswith(bytes(2 * silence))
    doc = Document((Speech(("One.",)), Pause(1.0)))
    audio = pcm(render(doc, Voices(voice), request()).chunks)
    assert audio == one[:-2 * silence] + bytes(2 * voice.sample_rate)


def spy_params(voice: Voice) -> list[SynthesisParams]:
    """The parameters each speech part is synthesized with (the tiny voice ignores the
    length scale: it predicts no durations)."""
    seen: list[SynthesisParams] = []
    original = voice.synthesize_sentences

    def spy(sentences: object, params: SynthesisParams | None = None) -> Iterator[AudioChunk]:
        seen.append(params or SynthesisParams())
        return original(sentences, params)  # type: ignore[arg-type]

    voice.synthesize_sentences = spy  # type: ignore[method-assign]
    return seen


def test_rate_divides_the_length_scale(voice: Voice) -> None:
    seen = spy_params(voice)
    doc = Document((Speech(("One.",)), Speech(("Two.",), rate=2.0)))
    list(render(doc, Voices(voice), request()).chunks)
    scale = voice.config.length_scale
    assert [p.length_scale for p in seen] == [None, scale / 2]
    seen.clear()  # a part's rate multiplies the request's speed
    list(render(doc, Voices(voice), request(speed=0.5)).chunks)
    assert [p.length_scale for p in seen] == [scale * 2, scale]
    assert all(p.noise_scale == 0.0 for p in seen)


def test_volume_scales_the_part_and_the_request_volume_caps_it(voice: Voice) -> None:
    loud = np.frombuffer(pcm(voice.synthesize("Hello there.", QUIET)), "<i2").astype(float)
    half = render(Document((Speech(("Hello there.",), volume=0.5),)), Voices(voice), request())
    assert np.array_equal(np.frombuffer(pcm(half.chunks), "<i2"),
                          np.clip(np.rint(loud * 0.5), -32768, 32767).astype("<i2"))
    # request volume 0.5 x part volume 4.0 is at most 1.0: the samples at most doubled
    capped = render(Document((Speech(("Hello there.",), volume=4.0),)), Voices(voice),
                    request(volume=0.5))
    assert np.array_equal(np.frombuffer(pcm(capped.chunks), "<i2"),
                          np.clip(np.rint(loud * 2.0), -32768, 32767).astype("<i2"))


def test_a_chime_comes_first_at_its_own_format(voice: Voice) -> None:
    chime = tone(44100, 4410, channels=2)
    req = request("Hello there.", chime="ding")
    rendered = render(request_document(req), Voices(voice), req, chimes=Chimes(ding=chime))
    chunks = list(rendered.chunks)
    assert chunks[0] == chime and chunks[0].format == AudioFormat(44100, 2, 2)
    assert pcm(chunks[1:]) == pcm(voice.synthesize("Hello there.", QUIET))
    assert rendered.format == AudioFormat(rate=voice.sample_rate)  # the device opens for speech


def test_refusals_come_before_any_synthesis(voice: Voice) -> None:
    calls: list[int] = []
    original = voice.ids_to_audio
    voice.ids_to_audio = lambda ids, p: calls.append(1) or original(ids, p)  # type: ignore
    voices = Voices(voice)
    with pytest.raises(LookupError, match="unknown voice 'nope'"):
        render(Document((Speech(("One.",)), Speech(("Two.",), voice="nope"))), voices, request())
    with pytest.raises(ValueError, match="unknown chime 'gong'"):
        render(Document((Speech(("One.",)), Sound("gong"))), voices, request(),
               chimes=Chimes())
    with pytest.raises(NoChimes, match="no chimes directory"):
        render(Document((Sound("ding"),)), voices, request())
    with pytest.raises(TextError):
        render(Document((Speech(("One.",)), Speech(("x" * 100_000,)))), voices, request())
    with pytest.raises(TextError, match="nothing to speak"):
        render(Document((Speech(("  ",)), Pause(0.5))), voices, request())
    assert calls == []


def test_speech_is_synthesized_as_the_caller_iterates(voice: Voice) -> None:
    calls: list[int] = []
    original = voice.synthesize_sentences

    def counting(*args: object, **kwargs: object) -> Iterator[AudioChunk]:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    voice.synthesize_sentences = counting  # type: ignore[method-assign]
    doc = Document((Speech(("One.",)), Pause(0.1), Speech(("Two.",))))
    chunks = render(doc, Voices(voice), request()).chunks
    assert calls == []
    next(chunks)
    assert calls == [1]


def test_the_whole_utterance_is_one_cache_entry(voice: Voice, tmp_path: Path) -> None:
    cache = PhraseCache(tmp_path, 50_000_000)
    chimes = Chimes(ding=tone(48000, 4800))
    doc = Document((Sound("ding"), Speech(("One.",)), Pause(0.2), Speech(("Two.",))))
    first = render(doc, Voices(voice), request(), cache=cache, chimes=chimes)
    assert not first.cached
    played = list(first.chunks)
    assert cache.stats()["entries"] == 1
    again = render(doc, Voices(voice), request(), cache=cache, chimes=chimes)
    assert again.cached and list(again.chunks) == played
    assert played[0].format == AudioFormat(rate=48000)
    # each part is in the key: another pause, another chime, another order
    for other, other_chimes in [
        (Document((Sound("ding"), Speech(("One.",)), Pause(0.3), Speech(("Two.",)))), chimes),
        (doc, Chimes(ding=tone(48000, 4801))),
        (Document((Speech(("One.",)), Pause(0.2), Speech(("Two.",)), Sound("ding"))), chimes),
        (Document((Sound("ding"), Speech(("One.",), volume=0.5), Pause(0.2),
                   Speech(("Two.",)))), chimes),
    ]:
        assert not render(other, Voices(voice), request(), cache=cache,
                          chimes=other_chimes).cached


def test_given_phonemes_and_verbatim_text_reach_the_voice(voice: Voice) -> None:
    given = Document((Speech(("Hello", Phonemes("bˈɑː", text="world"))),))
    audio = pcm(render(given, Voices(voice), request()).chunks)
    assert audio == pcm(voice.synthesize(["Hello", Phonemes("bˈɑː", text="world")], QUIET))
    assert audio != pcm(voice.synthesize("Hello world", QUIET))
    words = Document((Speech(("Room 12",), verbatim=True),))
    assert pcm(render(words, Voices(voice), request()).chunks) == pcm(
        voice.synthesize("Room 12", QUIET, verbatim=True))
