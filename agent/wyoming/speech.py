"""From a Wyoming request to the agent's synthesis: the voice it names, the parameters, the
text's bounds and format, and the sentences of text that arrives in chunks.

The audio comes from the same path as an MQTT ``speak`` (:func:`agent.pipeline.render.render`
of the text or its SSML document: the voice library's live voice, the phrase cache, the text
frontend with its normalizer and lexicon, the same check for text a voice cannot speak):
:func:`start_synthesis`. Everything that can refuse a request (unknown voice or speaker;
empty, oversize, unspeakable text; bad SSML) raises :class:`Refused` with a one-line reason
before any audio is made; the text is admitted as every door's (:mod:`agent.pipeline.admit`,
whose codes are the ``error`` codes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.audio.convert import StreamConverter, encode
from agent.audio.format import AudioChunk, AudioFormat
from agent.library.voices import VoiceLibrary, VoiceNotFound
from agent.pipeline.admit import Ask, Context, Refusal, admit, text_refusal
from agent.pipeline.render import render
from agent.text.document import Document, looks_like_ssml, plain
from agent.text.frontend import TextError
from agent.voice.voice import SynthesisParams, Voice, VoiceLoadError

if TYPE_CHECKING:
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.settings import WyomingSettings
    from agent.wyoming.catalog import Catalog

__all__ = ["Refused", "SentenceBuffer", "SpeechCheck", "VoiceChoice", "check_text",
           "choose_voice", "is_ssml", "refused", "start_synthesis"]

SpeechCheck = Callable[[Document, str], "str | None"]
"""Why a document cannot be said by the voice it names (:class:`agent.library.languages.
SpeechCheck`), or None."""

_MAX_NAME_CHARS = 128
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]]*(?:\s+|$)")
"""The end of a sentence in text that is still arriving: closing punctuation (and quotes or
brackets after it) followed by white space. "3.5" and "e.g." inside a word do not end one."""


class Refused(Exception):
    """A request the server will not synthesize; ``code`` and the one-line reason go into the
    ``error`` event."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class VoiceChoice:
    """The voice a request (or a whole stream) is synthesized with: the :class:`Voice` object
    itself, held for the request's lifetime, so a reload never changes it mid-stream."""

    voice: Voice
    params: SynthesisParams
    library: VoiceLibrary
    """For the other voices an SSML ``<voice name>`` names."""

    def get(self, name: str | None = None) -> Voice:
        """The held voice for its own name (or none), the library's live one for another."""
        if name is None or name == self.voice.name:
            return self.voice
        return self.library.get(name)


def _text_of(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_NAME_CHARS:
        raise Refused("bad-request", f"voice {field} must be a string of at most "
                      f"{_MAX_NAME_CHARS} characters")
    return value or None


def _by_language(catalog: Catalog, language: str) -> str:
    """The installed voice for ``language`` (en_US, or just en): the default voice when it
    speaks it, else the first that does."""
    def speaks(langs: list[str]) -> bool:
        return any(lang == language or lang.split("_")[0] == language for lang in langs)

    voices = catalog.installed()
    default = catalog.voices.default_voice
    for facts in sorted(voices, key=lambda f: f.name != default):
        if speaks(facts.languages):
            return facts.name
    raise Refused("unknown-voice", f"no installed voice speaks {language!r}")


def _speaker_id(voice: Voice, speaker: str | None) -> int | None:
    if speaker is None:
        return None
    config = voice.config
    if speaker in config.speaker_id_map:
        return config.speaker_id_map[speaker]
    if speaker.isdigit() and int(speaker) < max(1, config.num_speakers):
        return int(speaker)
    have = ", ".join(sorted(config.speaker_id_map)) or f"0..{max(1, config.num_speakers) - 1}"
    raise Refused("unknown-speaker", f"voice {voice.name} has no speaker {speaker!r} "
                  f"(has: {have[:200]})")


def choose_voice(catalog: Catalog, data: object, settings: WyomingSettings) -> VoiceChoice:
    """The live voice for a request's ``voice`` object (``name``, ``speaker``, ``language``),
    the default voice when it names none. Raises :class:`Refused`."""
    fields = data if isinstance(data, dict) else {}
    if data is not None and not isinstance(data, dict):
        raise Refused("bad-request", "voice must be an object")
    name = _text_of(fields.get("name"), "name")
    language = _text_of(fields.get("language"), "language")
    speaker = _text_of(fields.get("speaker"), "speaker")
    if name is None and language is not None:
        name = _by_language(catalog, language)
    try:
        voice = catalog.voices.get(name)
    except VoiceNotFound as exc:
        raise Refused("unknown-voice", str(exc)) from exc
    except VoiceLoadError as exc:
        raise Refused("voice-unavailable", str(exc)) from exc
    params = SynthesisParams(length_scale=settings.length_scale,
                             noise_scale=settings.noise_scale, noise_w=settings.noise_w,
                             speaker_id=_speaker_id(voice, speaker))
    return VoiceChoice(voice, params, catalog.voices)


def is_ssml(text_format: object, text: str | None) -> bool:
    """Whether a request's text is SSML: ``text_format`` ``ssml``, or unset and the text starts
    with ``<speak`` (as an MQTT ``speak`` without ``ssml``)."""
    if text_format is None:
        return text is not None and looks_like_ssml(text)
    if text_format in ("text", "ssml"):
        return text_format == "ssml"
    raise Refused("bad-request", "text_format must be text or ssml")


def refused(refusal: Refusal) -> Refused:
    """The admission's refusal as this door's exception (its code is the ``error`` code)."""
    return Refused(refusal.code.value, refusal.reason)


def check_text(text: object, max_chars: int) -> str:
    """``text`` when it is a string within the admission's bounds
    (:func:`agent.pipeline.admit.text_refusal`)."""
    refusal = text_refusal(text, max_chars)
    if refusal is not None:
        raise refused(refusal)
    return str(text)


def start_synthesis(choice: VoiceChoice, text: str, cache: PhraseCache | None, *,
                    ssml: bool = False, check: SpeechCheck | None = None,
                    ) -> Iterator[AudioChunk]:
    """The chunks of ``text`` (SSML when ``ssml``) in the chosen voice, synthesized as the
    caller iterates (the first as soon as the first decoder window is decoded). The text is
    parsed, checked and phonemized here, so a text that cannot be said raises
    :class:`Refused` before any inference. Runs on a synthesis thread (it may read the phrase
    cache's disk)."""
    admitted = admit(Ask(text, ssml=ssml, voice=choice.voice.name, params=choice.params,
                         chime=""),
                     Context(max_text_chars=len(text), sounds=tuple, speakable=check))
    if isinstance(admitted, Refusal):
        raise refused(admitted)
    request = admitted.request
    try:
        rendered = render(request.document or plain(text), choice, request, cache=cache)
        return in_format(rendered.chunks, rendered.format)
    except TextError as exc:
        raise Refused("bad-text", str(exc)) from exc
    except VoiceNotFound as exc:
        raise Refused("unknown-voice", str(exc)) from exc
    except VoiceLoadError as exc:
        raise Refused("voice-unavailable", str(exc)) from exc
    except ValueError as exc:  # a parameter the voice refuses; a chime
        raise Refused("bad-request", str(exc)) from exc


def in_format(chunks: Iterator[AudioChunk], fmt: AudioFormat) -> Iterator[AudioChunk]:
    """``chunks`` all in ``fmt`` (the rate ``audio-start`` announced): a part of another rate
    (an SSML ``<voice>`` of another sample rate) is resampled, without a seam, as the player
    does for its device; chunks already in ``fmt`` pass as they are."""
    converter: StreamConverter | None = None
    for chunk in chunks:
        if converter is None and chunk.format == fmt:
            yield chunk
            continue
        if converter is None:
            converter = StreamConverter(fmt.rate, fmt.channels)
        frames = converter.push(chunk)
        if len(frames):
            yield AudioChunk(encode(frames, "S16_LE"), fmt, chunk.text)
    tail = converter.flush() if converter is not None else None
    if tail is not None and len(tail):
        yield AudioChunk(encode(tail, "S16_LE"), fmt)


class SentenceBuffer:
    """Text of a streamed request (``synthesize-chunk``\\ s) cut into whole sentences.

    Bounded: the whole stream's text counts against ``max_chars``. ``whole``: never cut (an
    SSML document is said when it is complete, at :meth:`flush`)."""

    def __init__(self, max_chars: int, *, whole: bool = False) -> None:
        self.max_chars = max_chars
        self.whole = whole
        self.received = 0
        self._pending = ""

    def add(self, text: object) -> list[str]:
        """Append a chunk; the sentences it completed. Raises :class:`Refused`."""
        if not isinstance(text, str):
            raise Refused("bad-request", "text must be a string")
        self.received += len(text)
        if self.received > self.max_chars:
            raise Refused("text-too-long", f"streamed text is longer than {self.max_chars} "
                          "characters")
        self._pending += text
        if self.whole:
            return []
        cut = 0
        for match in _SENTENCE_END.finditer(self._pending):
            if match.end() < len(self._pending) or match.group().endswith((" ", "\n", "\t")):
                cut = match.end()
        done, self._pending = self._pending[:cut], self._pending[cut:]
        return [s for s in _split(done) if s.strip()]

    def flush(self) -> list[str]:
        """What is left at ``synthesize-stop`` (one last sentence, perhaps unfinished)."""
        rest, self._pending = self._pending, ""
        return [rest] if rest.strip() else []


def _split(text: str) -> list[str]:
    out, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        out.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out
