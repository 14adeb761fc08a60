"""Normalization for German, French and Spanish voices (issue #29): numbers, ordinals, money,
times, dates, units, percentages and phone numbers in words, with num2words's numbers and each
language's word tables (:mod:`~agent.text.normalize.lang.words`) over the same passes
(:mod:`~agent.text.normalize.lang.rules`). Other languages have none: espeak-ng reads them."""

from __future__ import annotations

from agent.text.normalize.lang.rules import PASSES
from agent.text.normalize.lang.words import TABLES, Words

__all__ = ["LANGUAGES", "LanguageNormalizer"]

LANGUAGES = frozenset(TABLES)
"""The languages (ISO 639-1) with rules here."""


class LanguageNormalizer:
    """The passes of :data:`~agent.text.normalize.lang.rules.PASSES` for one language."""

    __slots__ = ("_words", "key", "language")

    def __init__(self, language: str, key: str) -> None:
        if language not in TABLES:
            raise ValueError(f"no normalization rules for language {language!r}")
        self._words: Words = TABLES[language]
        self.language = language
        self.key: str = key
        """Changes whenever the output could (the rules' digest and the language)."""

    def __call__(self, text: str) -> str:
        for step in PASSES:
            text = step(text, self._words)
        return text

    def __repr__(self) -> str:
        return f"LanguageNormalizer({self.key!r})"
