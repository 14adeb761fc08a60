"""Ordinals, decimals and cardinals: ``21st``, ``12.5``, ``-3``, ``1,250`` in words.

These passes run late: money, times, dates, phone numbers, units and ranges have taken their
numbers by then, so what is left is a count, a measure or an ordinal. A number glued to letters
(``B12``, ``mp3``) is not one of these and is left alone (the codes pass reads codes).
Every pattern is linear: possessive quantifiers, and a digit run is only tried at its start.
"""

from __future__ import annotations

import re
import unicodedata

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["ascii_digits", "cardinals", "decimals", "ordinals"]

_WHOLE = r"(?:\d{1,3}+(?>(?:,\d{3})+)(?![\d,]\d)|\d++)"
"""Digits with thousands separators (``1,250``), or plain digits."""

_ORDINAL = re.compile(rf"(?<![\w.,])({_WHOLE})(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL = re.compile(rf"(?<![\w.,])(-|−)?({_WHOLE})?\.(\d++)(?!\w|[.,]\d)")
_CARDINAL = re.compile(rf"(?<![\w.])(-|−)?({_WHOLE})(?!\w|\.\d)")


_OTHER_DIGIT = re.compile(r"(?![0-9])\d")


def ascii_digits(text: str, options: NormalizeOptions) -> str:
    """Digits of other scripts (fullwidth ``１２``, Arabic-Indic ``١٢``) as ASCII digits, so that
    every pass reads them (and none drops them); the first pass."""
    del options
    if text.isascii():
        return text
    return _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(0))), text)


def _sign(sign: str | None, text: str, start: int) -> str:
    """``minus`` for a sign that starts a word (``-5``, not the hyphen of ``COVID-19``)."""
    if not sign:
        return ""
    before = text[start - 1:start]
    return "minus " if not before or before.isspace() or before in "([" else sign


def ordinals(text: str, options: NormalizeOptions) -> str:
    """``1st`` "first", ``22nd`` "twenty second", ``100th`` "one hundredth"."""
    return _ORDINAL.sub(lambda m: spoken.ordinal(m[1], options), text)


def decimals(text: str, options: NormalizeOptions) -> str:
    """``12.5`` "twelve point five", ``0.25`` "zero point two five", ``.5`` "point five"."""

    def say(m: re.Match[str]) -> str:
        return _sign(m[1], text, m.start()) + spoken.decimal(m[2] or "", m[3], options)

    return _DECIMAL.sub(say, text)


def cardinals(text: str, options: NormalizeOptions) -> str:
    """Whole numbers, with or without thousands separators; ``-3`` "minus three"; a number
    with leading zeros (``007``) digit by digit."""

    def say(m: re.Match[str]) -> str:
        digits = m[2]
        said = (spoken.digits(digits) if len(digits) > 1 and digits.startswith("0")
                else spoken.cardinal(digits, options))
        return _sign(m[1], text, m.start()) + said

    return _CARDINAL.sub(say, text)
