"""Numbers in words: the one module that calls num2words, and tidies what it gives.

num2words writes ``one thousand, two hundred and thirty-four``: the comma would make espeak-ng
pause (a clause break inside a number) and the hyphen is read the same as a space, so commas go
and hyphens become spaces. American English leaves out the ``and`` inside a number
(``two hundred fifty``); British English keeps it (:attr:`NormalizeOptions.british`).

Every function takes digits as a string and refuses nothing: a number too long to be read as
one (more than :data:`MAX_WHOLE_DIGITS` digits) is read digit by digit.
"""

from __future__ import annotations

from typing import Any

from agent.text.normalize.options import NormalizeOptions

__all__ = ["MAX_WHOLE_DIGITS", "cardinal", "decimal", "digits", "num2words", "number", "ordinal",
           "plural", "year"]

MAX_WHOLE_DIGITS = 15
"""Longer whole numbers (past the trillions) are read digit by digit."""

_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_DIGIT_WORDS = dict(zip("0123456789", _DIGITS, strict=True))

_PLURALS = {"six": "sixes", "half": "halves", "penny": "pence", "foot": "feet", "inch": "inches",
            "century": "centuries", "hertz": "hertz", "celsius": "celsius", "yen": "yen"}


def num2words(number: int, **kwargs: Any) -> str:
    """num2words's reading of ``number``. The library (a module per language) is imported at
    the first number read, not with the normalizer: a text without numbers never loads it."""
    from num2words import num2words as words

    return str(words(number, **kwargs))


def _tidy(words: str, options: NormalizeOptions) -> str:
    words = words.replace(",", "").replace("-", " ")
    if not options.british:
        words = words.replace(" and ", " ")
    return words


def digits(text: str, *, zero: str = "zero") -> str:
    """Each digit on its own: ``"007"`` → "zero zero seven" (``zero="oh"``: "oh oh seven")."""
    return " ".join(zero if d == "0" else _DIGIT_WORDS[d] for d in text if d in _DIGIT_WORDS)


def cardinal(text: str, options: NormalizeOptions) -> str:
    """A whole number (``"1,234"``, ``"12"``) in words; separators are ignored."""
    plain = text.replace(",", "")
    if len(plain) > MAX_WHOLE_DIGITS:
        return digits(plain)
    return _tidy(num2words(int(plain), lang="en"), options)


def ordinal(text: str, options: NormalizeOptions) -> str:
    """``"21"`` → "twenty first"."""
    plain = text.replace(",", "")
    if len(plain) > MAX_WHOLE_DIGITS:
        return digits(plain) + " th"
    return _tidy(num2words(int(plain), lang="en", to="ordinal"), options)


def decimal(whole: str, fraction: str, options: NormalizeOptions) -> str:
    """``("12", "5")`` → "twelve point five"; ``("", "25")`` → "point two five"."""
    head = cardinal(whole, options) + " " if whole else ""
    return f"{head}point {digits(fraction)}"


def number(text: str, options: NormalizeOptions) -> str:
    """A whole or decimal number as written (``"1,250"``, ``"3.5"``, ``".25"``)."""
    whole, dot, fraction = text.partition(".")
    return decimal(whole, fraction, options) if dot and fraction else cardinal(whole, options)


def year(text: str, options: NormalizeOptions) -> str:
    """A year the way it is said: 1999 "nineteen ninety nine", 1905 "nineteen oh five",
    1900 "nineteen hundred", 2000-2009 "two thousand five", 2010 on "twenty twenty six".

    Outside 1000-2099, or with more than four digits, it is a plain cardinal.
    """
    value = int(text)
    if len(text) > 4 or not 1000 <= value <= 2099:
        return cardinal(text, options)
    return _tidy(num2words(value, lang="en", to="year"), options)


def plural(word: str) -> str:
    """The plural of the last word of a number's reading or a unit: "ninety" → "nineties"."""
    head, _, last = word.rpartition(" ")
    lower = last.lower()
    if lower in _PLURALS:
        said = _PLURALS[lower]
    elif lower.endswith("y") and lower[-2:-1] not in ("a", "e", "o", "u"):
        said = last[:-1] + "ies"
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        said = last + "es"
    else:
        said = last + "s"
    return f"{head} {said}" if head else said
