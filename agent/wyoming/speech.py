"""From a Wyoming request to the agent's synthesis: the voice it names, the parameters, the
text's bounds, and the sentences of text that arrives in chunks.

The audio comes from the same path as an MQTT ``speak`` of plain text (the voice library's
live voice, the phrase cache, the text frontend and its normalizer): :func:`start_synthesis`.
Everything that can refuse a request (unknown voice or speaker, empty, oversize or
unspeakable text) raises :class:`Refused` with a one-line reason before any audio is made.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.library.voices import VoiceNotFound
from agent.pipeline.render import cached_synthesis
from agent.text.frontend import TextError
from agent.voice.voice import SynthesisParams, Voice, VoiceLoadError

if TYPE_CHECKING:
    from agent.audio.format import AudioChunk
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.settings import WyomingSettings
    from agent.wyoming.catalog import Catalog

__all__ = ["Refused", "SentenceBuffer", "VoiceChoice", "choose_voice", "start_synthesis"]

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
    return VoiceChoice(voice, params)


def check_text(text: object, max_chars: int) -> str:
    """``text`` when it is a string within the bound with something in it."""
    if not isinstance(text, str):
        raise Refused("bad-request", "text must be a string")
    if len(text) > max_chars:
        raise Refused("text-too-long", f"text is longer than {max_chars} characters "
                      f"({len(text)})")
    if not text.strip():
        raise Refused("empty-text", "text is empty")
    return text


def start_synthesis(choice: VoiceChoice, text: str,
                    cache: PhraseCache | None) -> Iterator[AudioChunk]:
    """The chunks of ``text`` in the chosen voice, synthesized as the caller iterates (the
    first as soon as the first decoder window is decoded). The text is phonemized here, so an
    unspeakable text raises :class:`Refused` before any inference. Runs on a synthesis
    thread (it may take the phrase cache's disk)."""
    try:
        return cached_synthesis(cache, choice.voice, text, choice.params)
    except TextError as exc:
        raise Refused("bad-text", str(exc)) from exc
    except ValueError as exc:  # a parameter the voice refuses
        raise Refused("bad-request", str(exc)) from exc


class SentenceBuffer:
    """Text of a streamed request (``synthesize-chunk``\\ s) cut into whole sentences.

    Bounded: the whole stream's text counts against ``max_chars``."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
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
