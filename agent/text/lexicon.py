"""The device lexicon: words and phrases a fleet needs said its own way (stations, brands, people).

Each :class:`Entry` maps a word or phrase to a *respelling* (plain text that espeak-ng reads
right: ``"Nguyen" = "win"``) or to *phonemes* (IPA fed to the voice as it is:
``"Worcester" = { ipa = "wˈʊstɚ" }``). :meth:`Lexicon.rewrite` replaces whole words and phrases,
longest first, never inside a word: it walks the text once, following a trie (bounded by the
longest key) only where a word starts. The file format and its checks are in
:mod:`agent.text.lexicon_file`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from agent.text.document import Phonemes, Piece

__all__ = ["FORMAT_VERSION", "Entry", "Lexicon", "LexiconError", "is_word_char"]

FORMAT_VERSION = 1
"""The lexicon format this agent reads (the file's ``version``)."""
_END = ""
"""The trie's key for "an entry ends here" (no character is the empty string)."""


class LexiconError(ValueError):
    """A lexicon file that cannot be used; ``problems`` holds one line per problem found."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{source}: {problems[0]}{more}")


@dataclass(frozen=True, slots=True)
class Entry:
    """One word or phrase and how to say it: ``text`` (a respelling) or ``ipa``."""

    key: str
    """NFC, inner whitespace as single spaces."""
    text: str | None = None
    ipa: str | None = None
    case_sensitive: bool = False


def is_word_char(ch: str) -> bool:
    """Letters, digits, ``_`` and combining marks: what a match never cuts through."""
    return ch.isalnum() or ch == "_" or unicodedata.category(ch)[0] == "M"


class Lexicon:
    """Entries ready to match. Immutable once built; safe to use from any thread.

    ``key`` names the content (format version and the file's sha256), ``""`` for a lexicon
    without entries: caches of phonemes and audio include it, so a changed file never serves
    what the old one made.
    """

    def __init__(self, entries: Collection[Entry] = (), *, sha256: str = "",
                 source: str = "") -> None:
        self.entries = len(entries)
        self.sha256 = sha256
        self.source = source
        self.key = f"lexicon/v{FORMAT_VERSION}/{sha256}" if entries else ""
        self._exact: dict[str, Any] = {}
        self._folded: dict[str, Any] = {}
        for entry in entries:
            if entry.case_sensitive:
                _insert(self._exact, entry.key, entry)
            else:
                _insert(self._folded, entry.key.casefold(), entry)

    def __len__(self) -> int:
        return self.entries

    def rewrite(self, text: str) -> list[Piece]:
        """``text`` with every entry replaced: respellings inline, IPA as :class:`Phonemes`
        pieces (``text`` = the words they stand for). Whole words and phrases only, longest
        first; a case-sensitive entry wins over a case-insensitive one of the same length."""
        if not self.entries:
            return [text] if text else []
        pieces: list[Piece] = []
        plain: list[str] = []
        start = i = 0
        n = len(text)
        while i < n:
            found = self._match(text, i) if _starts_word(text, i) else None
            if found is None:
                i += 1
                continue
            end, entry = found
            plain.append(text[start:i])
            if entry.ipa is not None:
                if "".join(plain):
                    pieces.append("".join(plain))
                plain = []
                pieces.append(Phonemes(entry.ipa, text=text[i:end]))
            else:
                plain.append(entry.text or "")
            start = i = end
        plain.append(text[start:])
        if "".join(plain):
            pieces.append("".join(plain))
        return pieces

    def _match(self, text: str, start: int) -> tuple[int, Entry] | None:
        """The longest entry that matches at ``start`` and ends at a word boundary."""
        best: tuple[int, Entry] | None = None
        for trie, fold in ((self._exact, False), (self._folded, True)):
            if not trie:
                continue
            found = _walk(trie, text, start, fold)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        return best


def _insert(trie: dict[str, Any], key: str, entry: Entry) -> None:
    node = trie
    for ch in key:
        node = node.setdefault(ch, {})
    node[_END] = entry


def _starts_word(text: str, i: int) -> bool:
    """Whether a match may start at ``i``: not in the middle of a word."""
    return i == 0 or not (is_word_char(text[i - 1]) and is_word_char(text[i]))


def _ends_word(text: str, end: int) -> bool:
    return end >= len(text) or not (is_word_char(text[end - 1]) and is_word_char(text[end]))


def _walk(trie: dict[str, Any], text: str, start: int, fold: bool) -> tuple[int, Entry] | None:
    """Follow ``trie`` along ``text`` from ``start`` (a run of whitespace is one space; with
    ``fold``, characters are case-folded); the longest entry ending at a word boundary. Bounded
    by the longest key."""
    node, i, n = trie, start, len(text)
    best: tuple[int, Entry] | None = None
    while i < n:
        ch = text[i]
        if ch.isspace():
            ch = " "
            while i + 1 < n and text[i + 1].isspace():
                i += 1
        for c in ch.casefold() if fold else ch:
            child: dict[str, Any] | None = node.get(c)
            if child is None:
                return best
            node = child
        i += 1
        entry = node.get(_END)
        if entry is not None and _ends_word(text, i):
            best = (i, entry)
    return best
