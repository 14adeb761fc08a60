"""How given phonemes join the text around them (the frontend's helpers for pieces).

A speech part's pieces (:data:`agent.text.document.Piece`) are text, which espeak-ng phonemizes
clause by clause, and :class:`~agent.text.document.Phonemes` given as IPA. Given phonemes become
a :class:`GivenClause` of their own; these functions put them into the sentence they stand in:
adjacent text joined first (:func:`merge`), the punctuation after them as their clause's end
(:func:`leading_mark`), word spaces around them (:func:`spaced`), and the text before them
phonemized as the start of a sentence that goes on (:data:`PLACEHOLDER`, :func:`open_ended`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent.text.document import Piece
from agent.text.espeak import Clause

__all__ = ["PLACEHOLDER", "GivenClause", "leading_mark", "merge", "open_ended", "spaced"]

_MARKS = {".": (".", True), "?": ("?", True), "!": ("!", True), ",": (",", False),
          ":": (":", False), ";": (";", False)}
"""Punctuation that ends given phonemes' clause when the text after them starts with it."""
PLACEHOLDER = "Quux"
"""A word espeak-ng says as one stressed word after any other: put after a text that given
phonemes follow, so that the text's last words get the forms they have inside a sentence
(``to`` tə, ``a`` ɐ; at the end of a text espeak-ng says tuː, ˈeɪ), then taken off again."""
_OPEN_END = frozenset(".?!,:;\u2026\u2013\u2014\u3002\uff0c\uff0e\uff01\uff1f\uff1a\uff1b")
_CLOSERS = "\"')]}\u00bb\u201d\u2019 "


@dataclass(frozen=True, slots=True)
class GivenClause(Clause):
    """Phonemes given as they are (a request's IPA, the lexicon's): a clause of their own
    until the sentence is put together."""


def leading_mark(text: str) -> tuple[str, tuple[str, bool] | None]:
    """``text`` without the punctuation it starts with, and the clause end that punctuation
    makes for the given phonemes before it (``. Next`` ends their sentence; an ellipsis is a
    pause)."""
    stripped = text.lstrip()
    if stripped.startswith(("...", "\u2026")):  # an ellipsis: a pause, not a sentence end
        return stripped.lstrip(".\u2026"), (",", False)
    mark = _MARKS.get(stripped[:1])
    if mark is None:
        return text, None
    return stripped.lstrip(".?!,:;"), mark


def merge(text: str | Sequence[Piece]) -> list[Piece]:
    """The pieces with adjacent text pieces joined into one text (they are one stretch for
    espeak-ng: sentences and clause marks come from the whole of it)."""
    pieces: list[Piece] = []
    for piece in (text,) if isinstance(text, str) else text:
        if isinstance(piece, str) and pieces and isinstance(pieces[-1], str):
            pieces[-1] += piece
        else:
            pieces.append(piece)
    return pieces


def spaced(clauses: Sequence[Clause]) -> list[Clause]:
    """Word spaces on each side of given phonemes within a sentence (espeak-ng's clauses of
    plain text are joined as Piper joins them: unchanged)."""
    out = list(clauses)
    for index in range(len(out) - 1):
        clause, following = out[index], out[index + 1]
        if (isinstance(clause, GivenClause) or isinstance(following, GivenClause)) and \
                not clause.end_of_sentence and not clause.terminator and \
                not clause.phonemes.endswith(" "):
            out[index] = replace(clause, phonemes=clause.phonemes + " ")
    return out


def open_ended(text: str) -> bool:
    """Whether ``text`` ends on no clause mark (closing quotes and brackets looked through):
    given phonemes after it continue its last clause."""
    return text.rstrip(_CLOSERS)[-1:] not in _OPEN_END
