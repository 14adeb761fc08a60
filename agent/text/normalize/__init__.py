"""Text normalization for announcements: numbers, money, times, dates, units, codes... in words.

:class:`Normalizer` runs a fixed :data:`ORDER` of passes over plain text before espeak-ng
phonemizes it. Each pass is a small function ``(text, options) -> str`` in a module of its own:
it finds the spans it understands (a price, a time, a date, a phone number...) and writes them
in words, leaving everything else exactly as it was, so a later pass (or espeak-ng) still sees
the rest. The words for numbers come from num2words; the tokenizing (which span is what) is
ours, with linear patterns only (bounded work for any input). English voices get these passes;
German, French and Spanish voices those of :mod:`agent.text.normalize.lang`
(:meth:`Normalizer.for_language`); other languages' text is left to espeak-ng's own rules.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
from pathlib import Path

from agent.text.normalize import (
    abbreviations,
    clock,
    codes,
    dates,
    initialisms,
    money,
    numbers,
    phone,
    ranges,
    roman,
    symbols,
    units,
    web,
    weekdays,
    years,
)
from agent.text.normalize.lang import LANGUAGES, LanguageNormalizer
from agent.text.normalize.options import DateOrder, NormalizeOptions, Pass

__all__ = ["LANGUAGES", "ORDER", "RULES_DIGEST", "RULES_VERSION", "DateOrder",
           "LanguageNormalizer", "NormalizeOptions", "Normalizer", "Pass", "rules_digest"]

RULES_VERSION = "1"
"""The rules' version, part of :attr:`Normalizer.key` with :data:`RULES_DIGEST`."""


def rules_digest(package: Path, words_version: str) -> str:
    """A digest of every file of the package (its rules and word lists) and of num2words's
    version: any edit to a pass, or another num2words, gives another key, so no cache keyed by
    it can serve a reading of older rules."""
    digest = hashlib.sha256(words_version.encode())
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".txt", ".json", ".toml"):
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _num2words_version() -> str:
    try:
        return importlib.metadata.version("num2words")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


RULES_DIGEST = rules_digest(Path(__file__).parent, _num2words_version())
"""The digest of this package's files and num2words's version (see :func:`rules_digest`)."""

ORDER: tuple[Pass, ...] = (
    numbers.ascii_digits,
    money.money,  # before the codes: "$3B" is money, not a code "3B"
    weekdays.weekdays,  # before the capitals: "MON–FRI" are days
    initialisms.initialisms,
    roman.roman_numerals,
    web.web_addresses,
    codes.codes,
    abbreviations.abbreviations,
    dates.date_ranges,  # before the pauses: "Nov 30 – Dec 3" is one range
    symbols.pauses,
    clock.times,
    dates.dates,
    phone.phones,
    ranges.ranges,
    units.temperatures,
    years.years,
    units.units,
    ranges.fractions,
    ranges.percent,
    numbers.ordinals,
    numbers.decimals,
    numbers.cardinals,
    symbols.symbols,
)
"""The passes, in the order they run: each sees the text the ones before it left."""

ENGLISH = frozenset({"en"})
"""The languages (ISO 639-1, the part of a code before ``_`` or ``-``) the passes are for."""


class Normalizer:
    """Runs the passes of :data:`ORDER` over a text; ``key`` names what could change its output."""

    __slots__ = ("_options", "key")
    language = "en"
    """The language of these passes (as :attr:`LanguageNormalizer.language`)."""

    def __init__(self, options: NormalizeOptions | None = None) -> None:
        self._options = options or NormalizeOptions()
        variant = "gb" if self._options.british else "us"
        self.key: str = (f"normalize/{RULES_VERSION}.{RULES_DIGEST}/{variant}/"
                         f"date_order={self._options.date_order}")
        """Changes whenever the output could: the options, the rules (their version and the
        digest of the package's files, which holds :data:`ORDER`), num2words's version."""

    @property
    def options(self) -> NormalizeOptions:
        return self._options

    def __call__(self, text: str) -> str:
        for step in ORDER:
            text = step(text, self._options)
        return text

    def __repr__(self) -> str:
        return f"Normalizer({self.key!r})"

    @classmethod
    def for_language(cls, language_code: str, options: NormalizeOptions | None = None
                     ) -> Normalizer | LanguageNormalizer | None:
        """A normalizer for a voice's language (``en``, ``en_US``, ``de_DE``, ``fr-fr``...).

        English has these passes; German, French and Spanish (:data:`LANGUAGES`) those of
        :mod:`agent.text.normalize.lang` (day-month dates; ``options`` are English's); for any
        other language None is returned, and espeak-ng reads numbers and symbols itself.
        """
        base, _, region = language_code.strip().replace("-", "_").partition("_")
        if base.lower() in LANGUAGES:
            return LanguageNormalizer(base.lower(),
                                      f"normalize/{RULES_VERSION}.{RULES_DIGEST}/{base.lower()}")
        if base.lower() not in ENGLISH:
            return None
        chosen = options or NormalizeOptions()
        if region.upper() == "GB" and not chosen.british:
            chosen = dataclasses.replace(chosen, british=True)
        return cls(chosen)
