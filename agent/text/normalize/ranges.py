"""Ranges, scores, fractions and percent: ``10–15``, ``9-5``, ``3-2``, ``1/2``, ``1 1/2``,
``20%``.

Two numbers joined by a hyphen or dash are "N to M" (the numbers stay digits for the later
passes); ``a/b`` is a fraction ("three quarters", ``1 1/2`` "one and a half"); ``20%`` "twenty
percent". The rules: docs/internals.md#normalizer-ranges-fractions-percent.
"""

from __future__ import annotations

import re

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["fractions", "percent", "ranges"]

_NUM = r"\d{1,3}+(?>(?:,\d{3})+)(?![\d,]\d)|\d++(?:\.\d++)?"
_NTH = r"(?:st|nd|rd|th)"
_RANGE = re.compile(rf"(?<![\w.,/:-])(?P<a>{_NUM})(?P<sa>{_NTH})?(?P<dash>\s?[–—]\s?|-|\s-\s)"
                    rf"(?P<b>{_NUM})(?P<sb>{_NTH})?(?![\w/:]|[-–—]\d|[.,]\d)")
_YEAR = re.compile(r"1\d{3}|20\d{2}")
_SEASON = re.compile(r"(?<![\w.,/:$€£¥#-])(?P<a>1[89]\d\d|20\d\d)(?P<sep>\s?[-–—]\s?|/)(?P<b>\d\d)"
                     r"(?![\w/:%°]|[-–—]\d|[.,]\d)")
"""A season or school year: ``1998–99``, ``2025/26``: the second year by its last two digits."""
_FRACTION = re.compile(r"(?<![\w.,/:])(?:(?P<whole>\d++)\s)?(?P<a>\d{1,6}+)/(?P<b>\d{1,6}+)"
                       r"(?![\w/]|[.,]\d)")
_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5),
           "⅖": (2, 5), "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅛": (1, 8),
           "⅜": (3, 8), "⅝": (5, 8), "⅞": (7, 8)}
_VULGAR_RE = re.compile(r"(?<![\w.,])(?:(?P<whole>\d++)\s?)?(?P<char>[" + "".join(_VULGAR) + "])")
_PERCENT = re.compile(rf"(?<![\w.,])(?P<sign>[-−])?(?P<n>{_NUM})\s?%")


def ranges(text: str, options: NormalizeOptions) -> str:
    """``N-M`` and ``N–M`` as "N to M" (the numbers left for the passes after; two years read
    as years here)."""

    def say(m: re.Match[str]) -> str:
        a, b = m["a"], m["b"]
        if _YEAR.fullmatch(a) and _YEAR.fullmatch(b) and not (m["sa"] or m["sb"]):
            return f"{spoken.year(a, options)} to {spoken.year(b, options)}"
        return f"{a}{m['sa'] or ''} to {b}{m['sb'] or ''}"

    return _RANGE.sub(say, _SEASON.sub(lambda m: _season(m, options), text))


def _season(m: re.Match[str], options: NormalizeOptions) -> str:
    """``1998–99`` "nineteen ninety eight to ninety nine"; with ``/`` only for the year after
    (``2025/26``; ``2025/30`` is left to the fractions)."""
    first, last = int(m["a"]), int(m["b"])
    following = (first + 1) % 100
    if (m["sep"] == "/" and last != following) or not (first % 100 < last or last == following):
        return m.group(0)
    if last == 0 or 2000 <= first < 2010:  # 1999–00, 2005–06: the whole second year
        said = spoken.year(str(first - first % 100 + last + (100 if last == 0 else 0)), options)
    else:
        said = ("oh " if last < 10 else "") + spoken.cardinal(str(last), options)
    return f"{spoken.year(m['a'], options)} to {said}"


def say_fraction(numerator: int, denominator: int, options: NormalizeOptions) -> str:
    """``(3, 4)`` "three quarters"; ``(5, 0)`` "five over zero"."""
    top = spoken.cardinal(str(numerator), options)
    if denominator in (0, 1) or denominator > 100:
        return f"{top} over {spoken.cardinal(str(denominator), options)}"
    if denominator == 2:
        name = "half"
    elif denominator == 4:
        name = "quarter"
    else:
        name = spoken.ordinal(str(denominator), options)
    return f"{top} {name if numerator == 1 else spoken.plural(name)}"


def _mixed(whole: str | None, numerator: int, denominator: int,
           options: NormalizeOptions) -> str:
    if not whole:
        return say_fraction(numerator, denominator, options)
    if numerator == 1 and denominator in (2, 4):
        part = "a half" if denominator == 2 else "a quarter"
    else:
        part = say_fraction(numerator, denominator, options)
    return f"{spoken.cardinal(whole, options)} and {part}"


_ALWAYS = re.compile(r"(?<![\w.,/])24/7(?![\w/]|[.,]\d)")
"""``24/7`` is "twenty four seven", never a fraction."""


def fractions(text: str, options: NormalizeOptions) -> str:
    """``1/2`` "one half", ``1 1/2`` "one and a half", ``¾`` "three quarters"."""
    text = _ALWAYS.sub("twenty four seven", text)
    text = _VULGAR_RE.sub(lambda m: _mixed(m["whole"], *_VULGAR[m["char"]], options), text)
    return _FRACTION.sub(lambda m: _mixed(m["whole"], int(m["a"]), int(m["b"]), options), text)


def percent(text: str, options: NormalizeOptions) -> str:
    """``20%`` "twenty percent"; ``-3%`` "minus three percent"."""

    def say(m: re.Match[str]) -> str:
        sign = "minus " if m["sign"] else ""
        return f"{sign}{spoken.number(m['n'], options)} percent"

    return _PERCENT.sub(say, text)
