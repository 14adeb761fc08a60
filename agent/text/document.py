"""What a request asks to be said, before any voice runs: the shared types of the text path.

A request's text becomes a :class:`Document`, an ordered tuple of :class:`Speech` (pieces of plain
text or :class:`Phonemes`), :class:`Pause` and :class:`Sound` parts, played back to back as one
utterance. Only types (validation, no behaviour), so the SSML parser, the lexicon, the normalizer,
the frontend and the worker agree on one shape. The parts: docs/internals.md#the-document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_PAUSE_S", "Document", "Part", "Pause", "Phonemes", "Piece", "Sound", "Speech",
           "looks_like_ssml", "plain", "spoken_text"]

MAX_PAUSE_S = 10.0
"""The longest single pause a document may hold (SSML allows at most 10 s per ``break``)."""
_LOOKS_LIKE: Final = re.compile(r"\s*(?:<speak[\s/>]|<\?xml[\s?]|<!DOCTYPE\s)")


def looks_like_ssml(text: str) -> bool:
    """True when ``text`` starts (after whitespace) with ``<speak``, or with an XML declaration
    (``<?xml``) or a document type declaration (``<!DOCTYPE``): markup, never read aloud. Here,
    not in :mod:`agent.text.ssml`, so a plain text never imports the SSML parser."""
    return _LOOKS_LIKE.match(text) is not None


@dataclass(frozen=True, slots=True)
class Phonemes:
    """IPA to feed the voice as is; ``text`` is what it stands for (logs, events)."""

    ipa: str
    text: str = ""

    def __post_init__(self) -> None:
        if not self.ipa.strip():
            raise ValueError("phonemes are empty")


Piece = str | Phonemes
"""Plain text to normalise and phonemize, or phonemes given as they are."""


@dataclass(frozen=True, slots=True)
class Speech:
    """Words for one voice, said as one stretch (sentences are found inside it)."""

    pieces: tuple[Piece, ...]
    voice: str | None = None
    """Another installed voice for this part; None: the request's voice."""
    rate: float | None = None
    """Multiplies the request's speaking rate (2.0 = twice as fast); None: 1.0."""
    volume: float | None = None
    """Multiplies the request's volume (0.0-1.0 after multiplying); None: 1.0."""
    verbatim: bool = False
    """True: the text pieces were already put in words (SSML ``say-as``); not normalised."""

    def __post_init__(self) -> None:
        if self.rate is not None and not self.rate > 0.0:
            raise ValueError(f"rate {self.rate} must be positive")
        if self.volume is not None and self.volume < 0.0:
            raise ValueError(f"volume {self.volume} must not be negative")


@dataclass(frozen=True, slots=True)
class Pause:
    """Silence of ``seconds`` (0 <= seconds <= :data:`MAX_PAUSE_S`)."""

    seconds: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.seconds <= MAX_PAUSE_S:
            raise ValueError(f"pause of {self.seconds} s outside 0-{MAX_PAUSE_S:g} s")


@dataclass(frozen=True, slots=True)
class Sound:
    """A named earcon from the chimes directory (a plain name, checked where it is looked up)."""

    name: str


Part = Speech | Pause | Sound


@dataclass(frozen=True, slots=True)
class Document:
    """The parts of one utterance, in order."""

    parts: tuple[Part, ...]
    warnings: tuple[str, ...] = field(default=(), repr=False)
    """What the markup asked that is not done (``ignored <prosody pitch>``); the parts are
    what is said. Left out of ``repr``, which keys the phrase cache: the same parts, the same
    audio."""

    def __iter__(self) -> Iterator[Part]:
        return iter(self.parts)

    def voices(self) -> set[str | None]:
        """Every voice a speech part names (None: the request's own)."""
        return {part.voice for part in self.parts if isinstance(part, Speech)}

    def with_sound_first(self, name: str) -> Document:
        """This document after the earcon ``name`` (a request's chime)."""
        return Document((Sound(name), *self.parts), self.warnings)


def plain(text: str) -> Document:
    """The document of plain (non-SSML) text: one speech part of one piece."""
    return Document((Speech((text,)),))


def spoken_text(document: Document) -> str:
    """The document's words as one string (text pieces, and what phonemes stand for): for
    logs, events and script checks."""
    words: list[str] = []
    for part in document:
        if isinstance(part, Speech):
            words.extend(p if isinstance(p, str) else p.text for p in part.pieces)
    return " ".join(w for w in words if w)
