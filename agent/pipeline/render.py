"""A request's :class:`~agent.text.document.Document` as one stream of audio: the one path from
what a request says to the chunks a :class:`~agent.audio.item.PlayItem` plays.

:func:`render` serves every front door (the synthesis worker, ``tts-agent synth``): speech parts
by their voice, pauses as exact silence, chimes at their own rate. Everything that can refuse the
request is checked when it is called, before the first chunk; synthesis runs lazily as the caller
iterates. The whole utterance is one phrase-cache entry. Design:
docs/internals.md#rendering-a-document.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple, dataclass, replace
from typing import Any, Protocol

import numpy as np

from agent import __version__
from agent.audio.format import AudioChunk, AudioFormat
from agent.logs import get_logger
from agent.pipeline.jobs import SpeakRequest
from agent.pipeline.phrase_cache import PhraseCache, cache_key, phrase_inputs, store_when_complete
from agent.pipeline.request_key import Once, request_key
from agent.text.document import Document, Pause, Sound, Speech, plain
from agent.text.frontend import Sentence, TextError
from agent.voice.voice import SynthesisParams, Voice

__all__ = ["ChimeSource", "Rendered", "VoiceSource", "cached_synthesis", "render",
           "request_document"]

log = get_logger(__name__)


class VoiceSource(Protocol):
    """What rendering needs from :class:`agent.library.voices.VoiceLibrary`."""

    def get(self, name: str | None = None) -> Voice: ...


class ChimeSource(Protocol):
    """What rendering needs from :class:`agent.audio.chimes.Chimes`."""

    def get(self, name: str) -> AudioChunk:
        """The chime's samples; raises ``ChimeError`` (a ValueError) with the reason."""
        ...


class NoChimes(ValueError):
    """A document asks for a sound where no chimes directory is available."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """A document ready to play: its chunks (lazy), and what the play item needs to know."""

    chunks: Iterator[AudioChunk]
    voice: Voice
    """The request's voice (its name and version go into the request's events)."""
    format: AudioFormat
    """The format to open the device in before the first chunk: the request's voice's (a
    chime at another rate is resampled to it)."""
    cached: bool = False
    """True when the chunks come from the phrase cache."""


@dataclass(frozen=True, slots=True)
class _SpeechPlan:
    voice: Voice
    sentences: list[Sentence]
    params: SynthesisParams
    gain: float
    """Factor on the part's samples (its volume, limited so that part x request <= 1)."""
    text_key: str
    """The frontend's normalizer and lexicon keys, as they were before phonemizing."""
    trim_frames: int = 0
    """Sentence silence cut from the end of the part's last sentence (a pause follows)."""


@dataclass(frozen=True, slots=True)
class _SilencePlan:
    frames: int
    rate: int


@dataclass(frozen=True, slots=True)
class _SoundPlan:
    name: str
    chunk: AudioChunk


_Plan = _SpeechPlan | _SilencePlan | _SoundPlan


def request_document(request: SpeakRequest) -> Document:
    """The document a request says: its own (SSML) or its plain text, after its chime."""
    document = request.document if request.document is not None else plain(request.text)
    return document.with_sound_first(request.chime) if request.chime else document


def render(document: Document, voices: VoiceSource, request: SpeakRequest, *,
           cache: PhraseCache | None = None, chimes: ChimeSource | None = None) -> Rendered:
    """The audio of ``document`` said for ``request`` (see the module docstring).

    Raises before any synthesis: ``VoiceNotFound``/``VoiceLoadError`` (a voice),
    ``TextError`` (text no voice part can speak), ``ChimeError``/:class:`NoChimes` (a sound).
    """
    if cache is None:
        main = voices.get(request.voice)
        plans = _plan(document, main, voices, request, chimes)
        return Rendered(_play(plans), main, AudioFormat(rate=main.sample_rate))
    once, sounds = Once(voices.get), Once(chimes.get) if chimes is not None else None
    main = once.get(request.voice)
    fmt = AudioFormat(rate=main.sample_rate)
    exact = request_key(document, main, once, sounds, request) if cache.exact_index else None
    hit = cache.get_exact(exact) if exact is not None else None
    if hit is not None:  # this very request, said before by these very voices: no text work
        return Rendered(iter(hit), main, fmt, cached=True)
    plans = _plan(document, main, once, request, sounds)
    key = cache_key("document", main.name, main.sha256, request.params,
                    inputs=[__version__, *(_plan_key(p) for p in plans)])
    if exact is not None and request_key(document, main, once, sounds, request) != exact:
        exact = None  # a lexicon swapped while the text was phonemized: record nothing
    hit = cache.get(key)
    if hit is not None:
        return Rendered(store_when_complete(cache, key, iter(hit), exact=exact, stored=True),
                        main, fmt, cached=True)
    return Rendered(store_when_complete(cache, key, _play(plans), exact=exact), main, fmt)


def cached_synthesis(cache: PhraseCache | None, voice: Voice, text: str,
                     params: SynthesisParams) -> Iterator[AudioChunk]:
    """Plain ``text`` said by ``voice`` with ``params``, through the phrase cache: the same
    entry as a plain speak request of that text (the phrase warmer, benches)."""
    request = SpeakRequest(text, voice=voice.name, params=params)
    return render(plain(text), _OneVoice(voice), request, cache=cache).chunks


class _OneVoice:
    def __init__(self, voice: Voice) -> None:
        self.voice = voice

    def get(self, name: str | None = None) -> Voice:
        return self.voice


def _plan(document: Document, main: Voice, voices: VoiceSource, request: SpeakRequest,
          chimes: ChimeSource | None) -> list[_Plan]:
    """Every part resolved: voices loaded, text phonemized, chimes read, pauses in frames."""
    plans: list[_Plan] = []
    rate = main.sample_rate
    for part in document:
        if isinstance(part, Speech):
            speech = _plan_speech(part, main, voices, request)
            if speech is not None:
                plans.append(speech)
                rate = speech.voice.sample_rate
        elif isinstance(part, Pause):
            frames = round(part.seconds * rate)
            if plans and isinstance(plans[-1], _SpeechPlan):
                last = plans[-1]
                silence = round(last.voice.sentence_silence_s * last.voice.sample_rate)
                plans[-1] = replace(last, trim_frames=silence)
            if frames:
                plans.append(_SilencePlan(frames, rate))
        elif isinstance(part, Sound):
            if chimes is None:
                raise NoChimes(f"chime {part.name!r}: no chimes directory is available")
            plans.append(_SoundPlan(part.name, chimes.get(part.name)))
    if not any(isinstance(p, _SpeechPlan | _SoundPlan) for p in plans):
        raise TextError("text has nothing to speak")
    return plans


def _plan_speech(part: Speech, main: Voice, voices: VoiceSource,
                 request: SpeakRequest) -> _SpeechPlan | None:
    """A speech part's voice, sentences and parameters; None for a part of blank text only."""
    if all(isinstance(p, str) and not p.strip() for p in part.pieces):
        return None
    voice = main if part.voice is None else voices.get(part.voice)
    params = request.synthesis_params(voice.config.length_scale)
    if voice is not main:  # another voice's speakers are not the request's
        params = replace(params, speaker_id=None)
    if part.rate is not None:
        base = voice.config.length_scale if params.length_scale is None else params.length_scale
        params = replace(params, length_scale=base / part.rate)
    gain = 1.0
    if part.volume is not None:
        outer = 1.0 if request.volume is None else request.volume
        gain = part.volume if outer <= 0.0 else min(part.volume, 1.0 / outer)
    text_key = voice.frontend.text_key
    return _SpeechPlan(voice, _sentences(voice, part), params, gain, text_key)


def _sentences(voice: Voice, part: Speech) -> list[Sentence]:
    """The part's sentences: its text and given phonemes (raises ``TextError``)."""
    return voice.sentences(part.pieces, verbatim=part.verbatim)


def _plan_key(plan: _Plan) -> list[Any]:
    """What of one part shapes the audio, JSON-able, for the utterance's cache key."""
    if isinstance(plan, _SpeechPlan):
        voice = plan.voice
        return ["speech", voice.name, voice.sha256, list(astuple(plan.params)), voice.chunking,
                plan.gain, plan.trim_frames, plan.text_key,
                phrase_inputs(voice, plan.sentences)]
    if isinstance(plan, _SilencePlan):
        return ["pause", plan.frames, plan.rate]
    fmt = plan.chunk.format
    return ["sound", plan.name, fmt.rate, fmt.width, fmt.channels,
            hashlib.sha256(plan.chunk.audio).hexdigest()]


def _play(plans: Sequence[_Plan]) -> Iterator[AudioChunk]:
    """The chunks of every part in order, synthesized as the caller iterates."""
    for plan in plans:
        if isinstance(plan, _SpeechPlan):
            yield from _speech(plan)
        elif isinstance(plan, _SilencePlan):
            yield silence(plan.frames, plan.rate)
        else:
            yield plan.chunk


def silence(frames: int, rate: int) -> AudioChunk:
    """``frames`` frames of 16-bit mono silence at ``rate``."""
    return AudioChunk(bytes(2 * frames), AudioFormat(rate=rate))


def _speech(plan: _SpeechPlan) -> Iterator[AudioChunk]:
    chunks: Iterable[AudioChunk] = plan.voice.synthesize_sentences(plan.sentences, plan.params)
    ended = 0
    for chunk in chunks:
        ended += chunk.ends_sentence
        last = plan.trim_frames and ended == len(plan.sentences) and chunk.ends_sentence
        out = _trimmed(chunk, plan.trim_frames) if last else chunk
        yield scaled(out, plan.gain) if plan.gain != 1.0 else out


def _trimmed(chunk: AudioChunk, frames: int) -> AudioChunk:
    keep = max(0, chunk.frames - frames) * chunk.format.frame_bytes
    return replace(chunk, audio=chunk.audio[:keep])


def scaled(chunk: AudioChunk, gain: float) -> AudioChunk:
    """``chunk`` (16-bit) with its samples multiplied by ``gain`` (rounded, clipped)."""
    samples = np.frombuffer(chunk.audio, dtype="<i2").astype(np.float32) * np.float32(gain)
    pcm = np.clip(np.rint(samples), -32768, 32767).astype("<i2")
    return replace(chunk, audio=pcm.tobytes())
