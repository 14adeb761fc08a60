"""SSML: the subset of the Speech Synthesis Markup Language a request may be written in.

:func:`parse_ssml` turns an SSML string into a :class:`~agent.text.document.Document`, or raises
:class:`SsmlError` with one line naming what is wrong: the XML parser's error (with its line and
column), the element or attribute that is not supported, or the value that is out of range.
What SSML for other engines asks and a voice cannot do is ignored and named in the document's
``warnings`` (:mod:`agent.text.ssml_subset`). Markup is never read aloud.

SSML arrives from the network: :mod:`agent.text.ssml_tree` reads it with defusedxml (no DTD,
so no entity expansion) into a bounded tree; :mod:`agent.text.ssml_values` reads the attributes.
The elements and attributes, and the lengths behind the keywords: ``docs/text.md`` ("SSML").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Final

from agent.text.document import (  # looks_like_ssml: re-exported
    Document,
    Part,
    Pause,
    Phonemes,
    Piece,
    Sound,
    Speech,
    looks_like_ssml,
)
from agent.text.normalize import Normalizer
from agent.text.normalize.say_as import INTERPRETATIONS, say_as
from agent.text.ssml_subset import TRANSPARENT, check, foreign, quoted, required
from agent.text.ssml_tree import (
    MAX_ATTRIBUTE_CHARS,
    MAX_DEPTH,
    MAX_ELEMENTS,
    Node,
    SsmlError,
    parse_tree,
)
from agent.text.ssml_values import (
    MAX_VOLUME,
    RATE_RANGE,
    RATES,
    STRENGTHS,
    VOLUMES,
    rate_factor,
    seconds,
    volume_factor,
)

__all__ = ["MAX_ATTRIBUTE_CHARS", "MAX_DEPTH", "MAX_ELEMENTS", "MAX_TOTAL_PAUSE_S",
           "MAX_WARNINGS", "PARAGRAPH_PAUSE_S", "RATES", "SAY_AS", "STRENGTHS", "VOLUMES",
           "SsmlError", "looks_like_ssml", "parse_ssml"]

MAX_TOTAL_PAUSE_S: Final = 60.0
"""Most silence one document may ask for, all its breaks and paragraph pauses together."""
PARAGRAPH_PAUSE_S: Final = 0.75
"""The silence between two paragraphs (``<p>``)."""
SAY_AS: Final = INTERPRETATIONS
"""The ``<say-as interpret-as>`` values (:mod:`agent.text.normalize.say_as` reads them)."""
MAX_WARNINGS: Final = 16
"""Most warnings one document keeps (each different); more are counted in the last."""

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SOUND: Final = re.compile(r"([A-Za-z0-9][A-Za-z0-9_-]{0,63})(?:\.wav)?")
_SENTENCE_END: Final = (".", "!", "?", "…")


@functools.cache
def _normalizer() -> Normalizer:
    return Normalizer()


def parse_ssml(text: str, *, max_chars: int,
               sounds: Collection[str] | None = None) -> Document:
    """The document ``text`` (SSML with a ``<speak>`` root) asks for. Raises :class:`SsmlError`.

    ``sounds``: the chimes an ``<audio src>`` may name; an unknown one is spoken as the
    element's content (its fallback) or, without content, refused. None: not checked here.
    """
    if len(text) > max_chars:
        raise SsmlError(f"SSML is longer than {max_chars} characters ({len(text)})")
    root = parse_tree(text)
    if root.tag != "speak":
        raise SsmlError(f"the root element must be <speak>, not <{root.tag}>")
    walker = _Walker(sounds)
    walker.element(root, _Style(), root=True)
    document = walker.finish()
    if not document.parts:
        raise SsmlError("SSML has nothing to speak")
    return document


@dataclass(frozen=True, slots=True)
class _Style:
    voice: str | None = None
    rate: float | None = None
    volume: float | None = None


class _Walker:
    """Walks the tree in document order, gathering speech pieces into parts."""

    def __init__(self, sounds: Collection[str] | None) -> None:
        self.sounds = sounds
        self.parts: list[Part] = []
        self.pieces: list[Piece] = []
        self.style = _Style()
        self.pending = 0.0
        """A paragraph pause due before the next thing said."""
        self.silence = 0.0
        self.warnings: list[str] = []
        """What was ignored, each once, in document order."""
        self.dropped = 0

    def finish(self) -> Document:
        self._flush()
        warnings = self.warnings
        if self.dropped:
            warnings = [*warnings, f"and {self.dropped} more ignored"]
        return Document(tuple(self.parts), warnings=tuple(warnings))

    def warn(self, warning: str) -> None:
        if warning in self.warnings:
            return
        if len(self.warnings) < MAX_WARNINGS - 1:
            self.warnings.append(warning)
        else:
            self.dropped += 1

    # -- what the elements add -------------------------------------------------------------

    def text(self, text: str, style: _Style) -> None:
        if not text.strip():  # whitespace separates words of the stretch being said
            if self.pieces:
                self._append(text)
            return
        self.piece(text, style)

    def piece(self, piece: Piece, style: _Style) -> None:
        self._take_pending()
        if self.pieces and style != self.style:
            self._flush()
        self.style = style
        self._append(piece)

    def _append(self, piece: Piece) -> None:
        if isinstance(piece, str) and self.pieces and isinstance(self.pieces[-1], str):
            self.pieces[-1] += piece
        else:
            self.pieces.append(piece)

    def words(self, words: str, style: _Style) -> None:
        """Words already read out (``say-as``): within the sentence when normalising them
        changes nothing (the usual case), else as a verbatim stretch of their own."""
        if _normalizer()(words) == words:  # spaced from the text around it
            self.piece(f" {words} ", style)
            return
        self._take_pending()
        self._flush()
        self.parts.append(Speech((words,), voice=style.voice, rate=style.rate,
                                 volume=style.volume, verbatim=True))

    def pause(self, seconds: float) -> None:
        seconds, self.pending = max(seconds, self.pending), 0.0
        if seconds > 0.0:
            self._flush()
            self._silence(seconds)
            self.parts.append(Pause(seconds))

    def sound(self, name: str) -> None:
        self._take_pending()
        self._flush()
        self.parts.append(Sound(name))

    def sentence_end(self) -> None:
        """End the sentence being said: a full stop unless it ends with one already."""
        while self.pieces and isinstance(self.pieces[-1], str) and not self.pieces[-1].strip():
            self.pieces.pop()
        if not self.pieces:
            return
        last = self.pieces[-1]
        if not isinstance(last, str):
            self._flush()  # the end of a speech part ends its sentence
            return
        words = last.rstrip()
        end = "" if not words or words.endswith(_SENTENCE_END) else "."
        self.pieces[-1] = words + end + (last[len(words):] or " ")

    def paragraph(self) -> None:
        self.sentence_end()
        if self.parts or any(isinstance(p, Phonemes) or p.strip() for p in self.pieces):
            self._flush()
            self.pending = max(self.pending, PARAGRAPH_PAUSE_S)

    def _take_pending(self) -> None:
        if self.pending > 0.0:
            self.pause(0.0)

    def _silence(self, seconds: float) -> None:
        self.silence += seconds
        if self.silence > MAX_TOTAL_PAUSE_S + 1e-9:
            raise SsmlError(f"the breaks and paragraph pauses add up to more than "
                            f"{MAX_TOTAL_PAUSE_S:g} s")

    def _flush(self) -> None:
        if any(isinstance(p, Phonemes) or p.strip() for p in self.pieces):
            self.parts.append(Speech(tuple(self.pieces), voice=self.style.voice,
                                     rate=self.style.rate, volume=self.style.volume))
        self.pieces = []

    # -- the elements ----------------------------------------------------------------------

    def element(self, node: Node, style: _Style, *, root: bool = False) -> None:
        for warning in check(node, root=root):
            self.warn(warning)
        handler = _HANDLERS.get(node.tag)
        if handler is not None:
            handler(self, node, style)
        elif node.tag in TRANSPARENT or foreign(node.tag):
            _transparent(self, node, style)
        elif node.tag != "speak":  # skipped: a mark, a description, metadata
            self.warn(f"ignored <{node.tag}>")
        else:
            self.content(node, style)

    def content(self, node: Node, style: _Style) -> None:
        for child in node.content:
            if isinstance(child, str):
                self.text(child, style)
            else:
                self.element(child, style)


def _block(walker: _Walker, node: Node, style: _Style) -> None:
    if node.tag == "p":
        walker.paragraph()
        walker.content(node, style)
        walker.paragraph()
    else:
        walker.sentence_end()
        walker.content(node, style)
        walker.sentence_end()


def _break(walker: _Walker, node: Node, style: _Style) -> None:
    time = node.attrs.get("time")
    if time is not None:
        walker.pause(seconds(time.strip(), node.where))
        return
    strength = node.attrs.get("strength", "medium").strip()
    if strength not in STRENGTHS:
        raise SsmlError(f"<break strength={strength!r}> is not one of "
                        f"{', '.join(STRENGTHS)} ({node.where})")
    walker.pause(STRENGTHS[strength])


def _transparent(walker: _Walker, node: Node, style: _Style) -> None:
    """An element whose content is spoken as if it were not there."""
    if node.tag == "emphasis" and node.attrs.get("level", "").strip() == "none":
        walker.content(node, style)  # no emphasis asked: nothing ignored
        return
    how = {"emphasis": ": spoken without emphasis",
           "lang": ": spoken by the current voice"}.get(node.tag, "")
    walker.warn(f"ignored <{node.tag}>{how}")
    walker.content(node, style)


def _say_as(walker: _Walker, node: Node, style: _Style) -> None:
    kind = required(node, "interpret-as")
    if kind not in SAY_AS:
        walker.warn(f"ignored <say-as interpret-as={quoted(kind)}>: its text read as usual")
        walker.text(node.text(), style)
        return
    try:
        words = say_as(kind, node.text().strip(), format=node.attrs.get("format"))
    except ValueError as exc:
        raise SsmlError(f"{exc} (<say-as> at {node.where})") from None
    if words.strip():
        walker.words(words, style)


def _sub(walker: _Walker, node: Node, style: _Style) -> None:
    walker.text(required(node, "alias"), style)


def _phoneme(walker: _Walker, node: Node, style: _Style) -> None:
    alphabet = node.attrs.get("alphabet", "ipa").strip()
    if alphabet != "ipa":
        walker.warn(f"ignored <phoneme alphabet={quoted(alphabet)}>: its text spoken")
        walker.text(node.text(), style)
        return
    ipa = required(node, "ph")
    walker.piece(Phonemes(ipa, text=" ".join(node.text().split())), style)


def _voice(walker: _Walker, node: Node, style: _Style) -> None:
    if "name" not in node.attrs and node.attrs:
        walker.content(node, style)  # chosen by gender, age...: ignored (warned), same voice
        return
    name = required(node, "name")
    if _NAME.fullmatch(name) is None:
        raise SsmlError(f"<voice name={name!r}> is not a voice name ({node.where})")
    walker.content(node, replace(style, voice=name))


def _audio(walker: _Walker, node: Node, style: _Style) -> None:
    src = required(node, "src")
    match = _SOUND.fullmatch(src)
    fallback = _Walker(walker.sounds)
    fallback.content(node, style)  # checked even when the chime plays
    spoken = bool(fallback.finish().parts)
    instead = "its fallback spoken" if spoken else "nothing in its place"
    if match is None:  # a URL or a path: never fetched
        walker.warn(f"ignored <audio src={quoted(src)}>: not a chime name, {instead}")
        walker.content(node, style)
    elif walker.sounds is None or match[1] in walker.sounds:
        walker.sound(match[1])
    elif spoken:
        walker.warn(f"ignored <audio src={quoted(src)}>: no such chime, {instead}")
        walker.content(node, style)
    else:
        known = ", ".join(sorted(walker.sounds)[:20]) or "none"
        raise SsmlError(f"unknown chime {match[1]!r} in <audio src> ({node.where}); "
                        f"chimes: {known}")


def _prosody(walker: _Walker, node: Node, style: _Style) -> None:
    rate, volume = style.rate, style.volume
    if "rate" in node.attrs:
        rate = (rate or 1.0) * rate_factor(node.attrs["rate"].strip(), node.where)
        low, high = RATE_RANGE
        if not low <= rate <= high:
            raise SsmlError(f"<prosody rate={node.attrs['rate']!r}> makes the rate {rate:g} "
                            f"times the request's, outside {low:g}-{high:g} ({node.where})")
    if "volume" in node.attrs:
        volume = (1.0 if volume is None else volume) * volume_factor(
            node.attrs["volume"].strip(), node.where)
        if volume > MAX_VOLUME:
            raise SsmlError(f"<prosody volume={node.attrs['volume']!r}> makes the volume "
                            f"{volume:g} times the request's, over {MAX_VOLUME:g} "
                            f"({node.where})")
    walker.content(node, replace(style, rate=rate, volume=volume))


_HANDLERS: Final[dict[str, Callable[[_Walker, Node, _Style], None]]] = {
    "p": _block, "s": _block, "break": _break, "say-as": _say_as, "sub": _sub,
    "prosody": _prosody, "phoneme": _phoneme, "voice": _voice, "audio": _audio,
}
