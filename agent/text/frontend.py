"""Text frontend: a staged pipeline from a request's text to the phoneme ids a Piper voice takes.

The text comes as pieces (:data:`agent.text.document.Piece`: plain text and given phonemes).
The stages, each a function or a small object tests can pin: :func:`normalize_text`, the
device lexicon (:class:`TextLexicon`), the normalizer (:class:`TextNormalizer`), symbols
dropped, espeak-ng (memoised, keyed by :attr:`Frontend.text_key`), :func:`given_phonemes`,
:func:`group_sentences`, :func:`phonemes_to_ids`. With no lexicon, no normalizer and symbols
kept, plain text gives exactly Piper's ids. The design: docs/internals.md#the-text-frontend.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

from agent.text.document import Phonemes, Piece
from agent.text.espeak import Clause, EspeakPhonemizer, identity
from agent.text.limits import DEFAULT_MAX_TEXT_CHARS, EMPTY, RAW_FACTOR, too_long
from agent.text.pieces import PLACEHOLDER, GivenClause, leading_mark, merge, open_ended, spaced

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "Frontend",
    "Sentence",
    "TextError",
    "TextLexicon",
    "TextNormalizer",
    "clean_text",
    "given_phonemes",
    "group_sentences",
    "normalize_text",
    "phonemes_to_ids",
]

BOS, EOS, PAD = "^", "$", "_"
_SPACE_AFTER = frozenset(",:;")
_WHITESPACE = re.compile(r"\s+")
MAX_EXPANSION = 8
"""The normalizer may write a text out at most this many times its length (characters)."""


class TextNormalizer(Protocol):
    """Puts the spans of a text it understands in words (:mod:`agent.text.normalize`)."""

    @property
    def key(self) -> str:
        """Changes whenever the output for some text could change."""
        ...

    def __call__(self, text: str) -> str: ...


class TextLexicon(Protocol):
    """The device lexicon (:mod:`agent.text.lexicon`): may be swapped while the agent runs."""

    @property
    def key(self) -> str:
        """Changes whenever the lexicon does (the file's sha256)."""
        ...

    def rewrite(self, text: str) -> list[Piece]:
        """``text`` with its words respelled, and words given as phonemes split out."""
        ...


class TextError(ValueError):
    """The text cannot be spoken: empty after normalisation, or too long."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """A unit of synthesis: one sentence, or one clause of a long sentence."""

    text: str
    phonemes: tuple[str, ...]
    """Phonemes as fed to the id map: NFD code points, punctuation and spaces included."""


def clean_text(text: str) -> str:
    """NFC-normalise, drop control/format characters and collapse whitespace (no limits)."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn")
    )
    return _WHITESPACE.sub(" ", text).strip()


def normalize_text(text: str, max_chars: int) -> str:
    """:func:`clean_text`, then the limits.

    Raises :class:`TextError` when nothing speakable is left or the text is too long.
    """
    if len(text) > max_chars * RAW_FACTOR:  # refuse absurd input before doing any work on it
        raise TextError(too_long(max_chars))
    text = clean_text(text)
    if not text:
        raise TextError(EMPTY)
    if len(text) > max_chars:
        raise TextError(too_long(max_chars, len(text)))
    return text


def given_phonemes(piece: Phonemes, id_map: Mapping[str, Sequence[int]]) -> str:
    """The IPA of ``piece`` as fed to the voice: NFD (like espeak-ng's output through
    :func:`clause_phonemes`), whitespace collapsed to word spaces. Raises :class:`TextError`
    naming a symbol the voice's id map lacks (given IPA is never silently skipped)."""
    ipa = _WHITESPACE.sub(" ", unicodedata.normalize("NFD", piece.ipa)).strip()
    for symbol in dict.fromkeys(ipa):
        if symbol not in id_map:
            name = unicodedata.name(symbol, "unnamed")
            raise TextError(f"phoneme {symbol!r} (U+{ord(symbol):04X} {name}) in "
                            f"{piece.text or piece.ipa!r} is not one this voice can say")
    return ipa


def clause_phonemes(clause: Clause) -> list[str]:
    """A clause's phonemes as a list of code points, with its punctuation kept."""
    phonemes = clause.phonemes + clause.terminator
    if clause.terminator in _SPACE_AFTER:
        phonemes += " "  # not a sentence boundary: the next clause follows after a pause
    return list(unicodedata.normalize("NFD", phonemes))


def group_sentences(clauses: Sequence[Clause], max_clause_phonemes: int = 0) -> list[Sentence]:
    """Join clauses into sentences at sentence ends.

    Grouping, punctuation and spacing are Piper's, so the ids match the reference runtime's.
    With ``max_clause_phonemes > 0`` a sentence is also cut after a clause once it holds at least
    that many phonemes, so the first audio of a long sentence comes from its first clause; a cut
    piece ends on its clause's punctuation, without the space that would lead to the next one.
    """
    sentences: list[Sentence] = []
    texts: list[str] = []
    phonemes: list[str] = []

    def flush(cut: bool) -> None:
        while cut and phonemes and phonemes[-1] == " ":
            phonemes.pop()
        if phonemes:
            sentences.append(Sentence(" ".join(texts), tuple(phonemes)))
        texts.clear()
        phonemes.clear()

    for clause in clauses:
        texts.append(clause.text)
        phonemes.extend(clause_phonemes(clause))
        if clause.end_of_sentence:
            flush(cut=False)
        elif 0 < max_clause_phonemes <= len(phonemes):
            flush(cut=True)
    flush(cut=False)
    return sentences


def phonemes_to_ids(phonemes: Sequence[str], id_map: Mapping[str, Sequence[int]]) -> list[int]:
    """Piper's id sequence: BOS, PAD, then each known phoneme followed by PAD, then EOS.

    Phonemes missing from the map are skipped (the voice cannot say them).
    """
    pad = list(id_map[PAD])
    ids = [*id_map[BOS], *pad]
    for phoneme in phonemes:
        mapped = id_map.get(phoneme)
        if mapped is None:
            continue
        ids.extend(mapped)
        ids.extend(pad)
    ids.extend(id_map[EOS])
    return ids


class Frontend:
    """Normalise, phonemize and map text for one voice's espeak language and id map.

    ``phonemizer`` is the espeak-ng wrapper to use (default: a new one for ``espeak_voice`` on
    the library :mod:`agent.text.espeak` chooses). ``normalizer`` and ``lexicon`` are the
    optional text stages (see the module); ``drop_symbols`` drops emoji and symbols without a
    reading (``text.symbols = "drop"``); ``scripts``, the scripts the voice reads, makes it skip
    words of others (:func:`agent.text.scripts.skip_unspeakable`). Methods may be called from
    any thread.
    """

    def __init__(
        self,
        espeak_voice: str,
        id_map: Mapping[str, Sequence[int]],
        *,
        max_chars: int = DEFAULT_MAX_TEXT_CHARS,
        cache_size: int = 1024,
        phonemizer: EspeakPhonemizer | None = None,
        normalizer: TextNormalizer | None = None,
        lexicon: TextLexicon | None = None,
        drop_symbols: bool = False,
        scripts: frozenset[str] | None = None,
    ) -> None:
        for symbol in (BOS, EOS, PAD):
            if symbol not in id_map:
                raise ValueError(f"phoneme_id_map lacks the {symbol!r} symbol")
        self.id_map = id_map
        self.max_chars = max_chars
        if phonemizer is not None and phonemizer.voice != espeak_voice:
            raise ValueError(f"phonemizer speaks {phonemizer.voice!r}, the voice needs"
                             f" {espeak_voice!r}")
        self._espeak = phonemizer or EspeakPhonemizer(espeak_voice)
        self.normalizer = normalizer
        self.lexicon = lexicon
        self.drop_symbols = drop_symbols
        self.scripts = scripts
        self._clauses = lru_cache(maxsize=cache_size)(self._clauses_uncached)
        self._marker: str | None = None

    @property
    def text_key(self) -> str:
        """What shapes the phonemes of a text besides the text, espeak-ng and the id map: the
        normalizer's key, the lexicon's key (it changes when the lexicon is swapped) and the
        symbols rule. Part of every cache key (this frontend's LRU, the phrase cache)."""
        normalizer = self.normalizer.key if self.normalizer is not None else "-"
        lexicon = self.lexicon.key if self.lexicon is not None else "-"
        return f"normalizer={normalizer}|lexicon={lexicon}|symbols=" + (
            "drop" if self.drop_symbols else "keep")

    @property
    def phonemizer_key(self) -> str:
        """The espeak-ng voice and build (:func:`agent.text.espeak.identity`): with
        :attr:`text_key` and the id map, what shapes a text's phoneme ids, for keys looked up
        before phonemizing (the phrase cache's exact-request index)."""
        return f"{self._espeak.voice}|{identity()}"

    def _clauses_uncached(self, text: str, verbatim: bool, before_given: bool,
                          key: str) -> tuple[Clause, ...]:
        del key  # part of the cache key only
        pieces = merge(self.lexicon.rewrite(text)) if self.lexicon is not None else [text]
        clauses: list[Clause] = []
        for index, piece in enumerate(pieces):
            if isinstance(piece, Phonemes):
                clauses.append(self._given(piece))
            else:
                rest = piece
                if clauses and isinstance(clauses[-1], GivenClause):
                    rest = self._end_given(clauses, piece)
                followed = before_given if index == len(pieces) - 1 else True
                clauses.extend(self._text_clauses(rest, verbatim, followed))
        return tuple(clauses)

    def _text_clauses(self, text: str, verbatim: bool, before_given: bool) -> list[Clause]:
        """Normaliser (unless ``verbatim``), symbols, espeak-ng: one text's clauses; with
        ``before_given``, as the start of a sentence that given phonemes continue."""
        if self.normalizer is not None and not verbatim:
            text = self.normalizer(text)
            if len(text) > MAX_EXPANSION * self.max_chars:
                raise TextError(f"text is longer than {MAX_EXPANSION * self.max_chars} "
                                "characters once numbers and symbols are in words")
        if self.drop_symbols:
            from agent.text.scripts import drop_symbols  # regex: imported when first needed

            text = drop_symbols(text)
        if self.scripts is not None and not text.isascii():
            from agent.text.scripts import skip_unspeakable

            text = skip_unspeakable(text, self.scripts)[0]
        if not text.strip():
            return []
        if not before_given or not open_ended(text):
            return self._espeak.clauses(text)
        return self._open_ended(text)

    def _open_ended(self, text: str) -> list[Clause]:
        """The clauses of a text that given phonemes continue (it ends on no mark): phonemized
        with :data:`PLACEHOLDER` after it, which is then taken off, and its last clause left
        open (no mark, not a sentence end: espeak-ng builds that end a text with a period)."""
        marker = " " + self._placeholder()
        probe = self._espeak.clauses(f"{text} {PLACEHOLDER}")
        if probe and probe[-1].phonemes.endswith(marker):
            last = probe[-1]
            words = last.text[:-len(PLACEHOLDER)].rstrip() if last.text.endswith(PLACEHOLDER) \
                else last.text
            return [*probe[:-1], replace(last, text=words, phonemes=last.phonemes[:-len(marker)],
                                         terminator="", end_of_sentence=False)]
        plain = self._espeak.clauses(text)  # the placeholder did not stay a word of its own
        return [*plain[:-1], replace(plain[-1], terminator="", end_of_sentence=False)]

    def _placeholder(self) -> str:
        if self._marker is None:
            said = self._espeak.clauses(PLACEHOLDER)
            self._marker = said[0].phonemes if said else PLACEHOLDER
        return self._marker

    def _given(self, piece: Phonemes) -> GivenClause:
        return GivenClause(piece.text or piece.ipa, given_phonemes(piece, self.id_map), "", False)

    @staticmethod
    def _end_given(clauses: list[Clause], text: str) -> str:
        """Give the punctuation ``text`` starts with to the given phonemes just before it."""
        text, mark = leading_mark(text)
        if mark is not None:
            given = clauses[-1]
            clauses[-1] = replace(given, text=given.text + mark[0], terminator=mark[0],
                                  end_of_sentence=mark[1])
        return text

    def clauses(self, text: str, *, verbatim: bool = False,
                before_given: bool = False) -> tuple[Clause, ...]:
        """The clauses of one already-cleaned text through the text stages (lexicon,
        normalizer, symbols) and espeak-ng (memoised); ``before_given``: given phonemes follow
        it in the same sentence."""
        return self._clauses(text, verbatim, before_given, self.text_key)

    def sentences(self, text: str | Sequence[Piece], max_clause_phonemes: int = 0, *,
                  verbatim: bool = False) -> list[Sentence]:
        """A text, or pieces of text and given phonemes, to sentences ready for :meth:`ids`;
        ``verbatim`` text is not normalised (already in words). Raises :class:`TextError`."""
        pieces = merge(text)
        size = sum(len(p) if isinstance(p, str) else len(p.ipa) for p in pieces)
        if size > self.max_chars * RAW_FACTOR:  # refuse absurd input before any work on it
            raise TextError(too_long(self.max_chars))
        cleaned = [clean_text(p) if isinstance(p, str) else p for p in pieces]
        size = sum(len(p) if isinstance(p, str) else len(p.ipa) for p in cleaned)
        if not size:
            raise TextError(EMPTY)
        if size > self.max_chars:
            raise TextError(too_long(self.max_chars, size))
        clauses: list[Clause] = []
        for index, piece in enumerate(cleaned):
            if isinstance(piece, Phonemes):
                clauses.append(self._given(piece))
                continue
            rest = piece
            if clauses and isinstance(clauses[-1], GivenClause):
                rest = self._end_given(clauses, piece).strip()
            if rest:
                followed = isinstance(cleaned[index + 1] if index + 1 < len(cleaned) else None,
                                      Phonemes)
                clauses.extend(self.clauses(rest, verbatim=verbatim, before_given=followed))
        sentences = group_sentences(spaced(clauses), max_clause_phonemes)
        if not sentences:
            raise TextError("text has nothing to speak")
        return sentences

    def ids(self, sentence: Sentence) -> list[int]:
        """The phoneme ids of one sentence, exactly as fed to the model."""
        return phonemes_to_ids(sentence.phonemes, self.id_map)

    def cache_info(self) -> dict[str, int]:
        """Hit/miss counters of the phonemization cache."""
        info = self._clauses.cache_info()
        return {"hits": info.hits, "misses": info.misses, "size": info.currsize,
                "max_size": info.maxsize or 0}
