"""Text normalization for announcements: numbers, money, times, dates, units, codes... in words.

:class:`Normalizer` runs a fixed :data:`ORDER` of passes over plain text before espeak-ng
phonemizes it. Each pass is a small function ``(text, options) -> str`` in a module of its own:
it finds the spans it understands (a price, a time, a date, a phone number...) and writes them
in words, leaving everything else exactly as it was, so a later pass (or espeak-ng) still sees
the rest. The words for numbers come from num2words; the tokenizing (which span is what) is
ours, with linear patterns only (bounded work for any input).

Only English voices get a normalizer (:meth:`Normalizer.for_language`); other languages' text is
left for espeak-ng to read with its own rules, as before.
"""

from __future__ import annotations

import dataclasses

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
    years,
)
from agent.text.normalize.options import DateOrder, NormalizeOptions, Pass

__all__ = ["ORDER", "RULES_VERSION", "DateOrder", "NormalizeOptions", "Normalizer", "Pass"]

RULES_VERSION = "1"
"""Raised whenever a change to any pass can change an output (part of :attr:`Normalizer.key`)."""

ORDER: tuple[Pass, ...] = (
    initialisms.initialisms,
    roman.roman_numerals,
    web.web_addresses,
    codes.codes,
    abbreviations.abbreviations,
    symbols.pauses,
    money.money,
    clock.times,
    dates.dates,
    phone.phones,
    units.temperatures,
    ranges.ranges,
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

    def __init__(self, options: NormalizeOptions | None = None) -> None:
        self._options = options or NormalizeOptions()
        names = ",".join(f"{p.__module__.rsplit('.', 1)[-1]}.{p.__name__}" for p in ORDER)
        variant = "gb" if self._options.british else "us"
        self.key: str = (f"normalize/{RULES_VERSION}/{variant}/"
                         f"date_order={self._options.date_order}/{names}")
        """Changes whenever the output could: the options, the rules version, the passes."""

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
    def for_language(cls, language_code: str,
                     options: NormalizeOptions | None = None) -> Normalizer | None:
        """A normalizer for a voice's language (``en``, ``en_US``, ``en-gb``...), or None.

        Only English has rules; for any other language None is returned, and espeak-ng keeps
        reading numbers and symbols itself, with that language's own rules.
        """
        base, _, region = language_code.strip().replace("-", "_").partition("_")
        if base.lower() not in ENGLISH:
            return None
        chosen = options or NormalizeOptions()
        if region.upper() == "GB" and not chosen.british:
            chosen = dataclasses.replace(chosen, british=True)
        return cls(chosen)
