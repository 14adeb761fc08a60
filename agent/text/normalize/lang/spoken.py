"""Numbers in words for the German, French and Spanish rules, through num2words: cardinals,
the form before a noun (``ein``, ``un``, ``veintiún``), decimals, ordinals with their endings,
years and digit strings."""

from __future__ import annotations

import functools
import re

from agent.text.normalize.spoken import num2words  # imports num2words when first called

__all__ = ["MAX_WHOLE_DIGITS", "before_noun", "cardinal", "decimal", "digits", "feminine",
           "number_value", "ordinal", "plural", "year"]

_GROUPING = re.compile(r"[.\s\u00a0\u202f']")


def number_value(written: str) -> tuple[int, str]:
    """The whole part of ``12.500,75`` (``12500``) and its decimals as written (``75``)."""
    whole, _, fraction = written.partition(",")
    return int(_GROUPING.sub("", whole) or "0"), fraction


MAX_WHOLE_DIGITS = 15
"""A longer whole number is read one digit at a time (num2words stops at some size)."""


@functools.lru_cache(maxsize=4096)
def cardinal(value: int, code: str) -> str:
    if value >= 10 ** MAX_WHOLE_DIGITS:
        return digits(str(value), code)
    return str(num2words(value, lang=code)).replace("-", " ")


def before_noun(value: int, code: str) -> str:
    """The cardinal as said before a (masculine) noun: ``ein Euro``, ``veintiún euros``."""
    words = cardinal(value, code)
    if code == "de" and words.endswith("eins"):
        return words[:-1]
    if code == "es" and words.endswith("uno"):
        return words[:-3] + ("ún" if words.endswith("iuno") else "un")
    return words


def feminine(value: int, code: str) -> str:
    """The cardinal before a feminine noun (French and Spanish ``une``, ``una``)."""
    words = cardinal(value, code)
    if code == "fr" and words.endswith("un"):
        return words + "e"
    if code == "es" and words.endswith("uno"):
        return words[:-1] + "a"
    return before_noun(value, code)


def digits(run: str, code: str) -> str:
    """A digit string one digit at a time (``null drei null``)."""
    return " ".join(cardinal(int(d), code) for d in run if d.isdigit())


def decimal(written: str, code: str, comma: str, *, noun: bool = False) -> str:
    """``3,5`` as ``drei Komma fünf``: the decimals one digit at a time."""
    value, fraction = number_value(written)
    whole = before_noun(value, code) if noun and not fraction else cardinal(value, code)
    return f"{whole} {comma} {digits(fraction, code)}" if fraction else whole


def plural(written: str) -> bool:
    """Whether a noun after this number is plural: anything but exactly one (or zero in French
    is left to the caller)."""
    value, fraction = number_value(written)
    return bool(fraction) or value != 1


def year(value: int, code: str) -> str:
    if code == "de" and 1100 <= value < 2000:
        return str(num2words(value, lang="de", to="year"))
    return cardinal(value, code)


_SPANISH_SHORT = {"primero": "primer", "tercero": "tercer"}


def ordinal(value: int, code: str, *, ending: str = "", female: bool = False,
            short: bool = False) -> str:
    """An ordinal: German with ``ending`` after its ``-e`` stem (``n``, ``r``: ``dritten``);
    French and Spanish feminine with ``female``; Spanish ``short`` before a noun (``primer``)."""
    words = str(num2words(value, lang=code, to="ordinal")).replace("-", " ")
    if code == "de":
        return words + ending
    if code == "fr":
        return "première" if female and value == 1 else words
    if code == "es":
        if female:
            return " ".join(w[:-1] + "a" if w.endswith("o") else w for w in words.split())
        if short:
            last = words.split()[-1]
            return words[: len(words) - len(last)] + _SPANISH_SHORT.get(last, last)
    return words
