"""Text frontend: a staged pipeline from raw text to the phoneme ids a Piper voice takes.

Stages, each a plain function that tests can pin:

1. :func:`normalize_text` - NFC, control characters dropped, whitespace collapsed, length limit.
2. :meth:`Frontend.clauses` - espeak-ng segmentation and IPA phonemes (memoised, LRU).
3. :func:`group_sentences` - clauses to sentences; optionally long sentences split at clause
   boundaries so streaming can start speaking the first clause early.
4. :func:`phonemes_to_ids` - the voice's ``phoneme_id_map`` with BOS ``^``, PAD ``_`` after each
   phoneme and EOS ``$``; punctuation is kept because the voice uses it for prosody.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from agent.text.espeak import Clause, EspeakPhonemizer

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "Frontend",
    "Sentence",
    "TextError",
    "group_sentences",
    "normalize_text",
    "phonemes_to_ids",
]

BOS, EOS, PAD = "^", "$", "_"
_SPACE_AFTER = frozenset(",:;")
_WHITESPACE = re.compile(r"\s+")


class TextError(ValueError):
    """The text cannot be spoken: empty after normalisation, or too long."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """A unit of synthesis: one sentence, or one clause of a long sentence."""

    text: str
    phonemes: tuple[str, ...]
    """Phonemes as fed to the id map: NFD code points, punctuation and spaces included."""


def normalize_text(text: str, max_chars: int) -> str:
    """NFC-normalise, drop control/format characters, collapse whitespace, enforce the limit.

    Raises :class:`TextError` when nothing speakable is left or the text is too long.
    """
    if len(text) > max_chars * 4:  # refuse absurd input before doing any work on it
        raise TextError(f"text is longer than {max_chars} characters")
    text = unicodedata.normalize("NFC", text)
    text = "".join(
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn")
    )
    text = _WHITESPACE.sub(" ", text).strip()
    if not text:
        raise TextError("text is empty")
    if len(text) > max_chars:
        raise TextError(f"text is longer than {max_chars} characters ({len(text)})")
    return text


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
    the library :mod:`agent.text.espeak` chooses). Methods may be called from any thread.
    """

    def __init__(
        self,
        espeak_voice: str,
        id_map: Mapping[str, Sequence[int]],
        *,
        max_chars: int = 5000,
        cache_size: int = 1024,
        phonemizer: EspeakPhonemizer | None = None,
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
        self._clauses = lru_cache(maxsize=cache_size)(self._clauses_uncached)

    def _clauses_uncached(self, text: str) -> tuple[Clause, ...]:
        return tuple(self._espeak.clauses(text))

    def clauses(self, normalized_text: str) -> tuple[Clause, ...]:
        """espeak-ng clauses of already-normalised text (memoised)."""
        return self._clauses(normalized_text)

    def sentences(self, text: str, max_clause_phonemes: int = 0) -> list[Sentence]:
        """Raw text to sentences ready for :meth:`ids`. Raises :class:`TextError`."""
        sentences = group_sentences(self.clauses(normalize_text(text, self.max_chars)),
                                    max_clause_phonemes)
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
