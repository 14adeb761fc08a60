"""The device lexicon: words and phrases a fleet needs said its own way (stations, brands, people).

Each :class:`Entry` maps a word or phrase to a *respelling* (plain text that espeak-ng reads
right: ``"Nguyen" = "win"``) or to *phonemes* (IPA fed to the voice as it is:
``"Worcester" = { ipa = "wˈʊstɚ" }``). :meth:`Lexicon.rewrite` replaces whole words and phrases,
longest first, never inside a word: it walks the text once and, only where a word starts that
begins some key, looks the words that follow up in a dict, as far as the longest such key. The
file format and its checks are in :mod:`agent.text.lexicon_file`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

import regex

from agent.text.document import Phonemes, Piece

__all__ = ["FORMAT_VERSION", "Entry", "Lexicon", "LexiconError", "count_words", "words_of"]

FORMAT_VERSION = 1
"""The lexicon format this agent reads (the file's ``version``)."""
_WHITESPACE = re.compile(r"\s+")
_TOKEN = regex.compile(r"[\w\p{M}]+|\s+|.", regex.DOTALL)


class LexiconError(ValueError):
    """A lexicon file that cannot be used; ``problems`` holds one line per problem found."""

    def __init__(self, source: str, problems: list[str], total: int | None = None) -> None:
        """``total``: how many problems were found (``problems`` may list the first ones)."""
        self.source = source
        self.problems = problems
        self.total = len(problems) if total is None else total
        more = f" (and {self.total - 1} more)" if self.total > 1 else ""
        super().__init__(f"{source}: {problems[0]}{more}")


@dataclass(frozen=True, slots=True)
class Entry:
    """One word or phrase and how to say it: ``text`` (a respelling) or ``ipa``."""

    key: str
    """NFC, inner whitespace as single spaces."""
    text: str | None = None
    ipa: str | None = None
    case_sensitive: bool = False


def words_of(text: str) -> list[tuple[int, int]]:
    """``text`` cut into words (runs of letters, digits, ``_`` and combining marks), runs of
    whitespace and single other characters: (start, end) of each. A match starts and ends at
    these boundaries, so it never cuts through a word."""
    return [m.span() for m in _TOKEN.finditer(text)]


def count_words(key: str) -> int:
    """The words of a key: runs of word characters, and each other character but spaces."""
    return sum(1 for start, _ in words_of(key) if not key[start].isspace())


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
        self._exact: dict[str, Entry] = {}
        """Case-sensitive entries by key."""
        self._folded: dict[str, Entry] = {}
        """The others by case-folded key."""
        self._longest: dict[str, tuple[int, int]] = {}
        """The longest key (case-folded characters, words) of the entries whose first word is
        this (case-folded): where a match is looked for at all, and how far."""
        for entry in entries:
            key = entry.key.casefold()
            if entry.case_sensitive:
                self._exact[entry.key] = entry
            else:
                self._folded[key] = entry
            first = key[slice(*words_of(key)[0])]
            chars, words = self._longest.get(first, (0, 0))
            self._longest[first] = (max(chars, len(key)), max(words, count_words(key)))

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
        tokens = words_of(text)
        done = i = 0
        while i < len(tokens):
            found = self._match(text, tokens, i)
            if found is None:
                i += 1
                continue
            last, entry = found
            start, end = tokens[i][0], tokens[last][1]
            plain.append(text[done:start])
            if entry.ipa is not None:
                if "".join(plain):
                    pieces.append("".join(plain))
                plain = []
                pieces.append(Phonemes(entry.ipa, text=text[start:end]))
            else:
                plain.append(entry.text or "")
            done, i = end, last + 1
        plain.append(text[done:])
        if "".join(plain):
            pieces.append("".join(plain))
        return pieces

    def _match(self, text: str, tokens: list[tuple[int, int]],
               first: int) -> tuple[int, Entry] | None:
        """The longest entry that starts at word ``first``: (its last word, the entry). Only
        where some key starts with that word; then one dict lookup per word that follows, as
        far as the longest such key (a run of whitespace counts as one space)."""
        start, end = tokens[first]
        longest = self._longest.get(text[start:end].casefold())
        if longest is None:
            return None
        chars, words = longest
        ends: list[tuple[int, int]] = []  # (last word, length of the match)
        length, seen, i = end - start, 1, first
        while True:
            ends.append((i, length))
            i += 1
            if i < len(tokens) and text[tokens[i][0]].isspace():
                length, i = length + 1, i + 1
            if i >= len(tokens) or seen >= words:
                break
            length += tokens[i][1] - tokens[i][0]
            seen += 1
            if length > chars:
                break
        spans = _WHITESPACE.sub(" ", text[start:tokens[ends[-1][0]][1]])
        for last, size in reversed(ends):
            span = spans[:size]
            entry = self._exact.get(span) or self._folded.get(span.casefold())
            if entry is not None:
                return last, entry
        return None
