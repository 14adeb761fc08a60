"""SSML ``<say-as>``: the words for a span whose kind the markup names.

:func:`say_as` reads ``text`` as ``interpret_as`` says it is, with the same words as the
normalizer's passes, and raises :class:`ValueError` with a one-line reason when the text is not
that, so markup that asks for the impossible is refused instead of read wrongly. The result is
final words: the caller marks it verbatim. What each ``interpret-as`` reads:
docs/internals.md#ssml-say-as.
"""

from __future__ import annotations

import re

from agent.text.normalize import clock, dates, money, spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["INTERPRETATIONS", "MAX_SAY_AS_CHARS", "say_as"]

MAX_SAY_AS_CHARS = 200
"""A ``say-as`` span longer than this is refused (every kind here is short)."""

_SYMBOLS = {"-": "dash", ".": "dot", "@": "at", "_": "underscore", "/": "slash", "+": "plus",
            "#": "hash", "&": "and", ":": "colon", "*": "star", "=": "equals", ",": "comma"}
_LETTER_A = "eh"
"""espeak-ng reads a lone ``a`` as the article; ``eh`` is the letter's name (``eɪ``)."""

_NUMBER = re.compile(r"(?P<sign>[-−+])?(?P<n>\d{1,3}+(?>(?:,\d{3})+)|\d++)(?:\.(?P<frac>\d++))?")
_ORDINAL = re.compile(r"(?P<n>\d{1,3}+(?>(?:,\d{3})+)|\d++)(?:st|nd|rd|th)?", re.IGNORECASE)
_PHONE = re.compile(r"\+?[\d\s().-]++")
_DATE_FORMATS = ("mdy", "dmy", "ymd", "md", "dm", "my", "ym", "y", "m", "d")
_MONTH_NAMES = {name.lower(): n for n, name in enumerate(dates.MONTHS, 1)} | {
    name[:3].lower(): n for n, name in enumerate(dates.MONTHS, 1)} | {"sept": 9}


def _spell(text: str) -> str:
    out: list[str] = []
    for char in text:
        if char.isascii() and char.isalpha():
            out.append(_LETTER_A if char in "aA" else char.lower())
        elif char.isascii() and char.isdigit():
            out.append(spoken.digits(char))
        elif char in _SYMBOLS:
            out.append(_SYMBOLS[char])
        elif not char.isspace():
            out.append(char)
    return " ".join(out)


def _digits(text: str, options: NormalizeOptions) -> str:
    del options
    groups = [g for g in re.split(r"[\s-]+", text) if g]
    if not groups or not all(g.isascii() and g.isdigit() for g in groups):
        raise ValueError(f"say-as digits: {text!r} is not digits")
    return ", ".join(spoken.digits(g) for g in groups)


def _cardinal(text: str, options: NormalizeOptions) -> str:
    m = _NUMBER.fullmatch(text)
    if not m:
        raise ValueError(f"say-as cardinal: {text!r} is not a number")
    sign = {"-": "minus ", "−": "minus ", "+": "plus "}.get(m["sign"] or "", "")
    frac = m["frac"]
    return sign + (spoken.decimal(m["n"], frac, options) if frac
                   else spoken.cardinal(m["n"], options))


def _ordinal(text: str, options: NormalizeOptions) -> str:
    m = _ORDINAL.fullmatch(text)
    if not m:
        raise ValueError(f"say-as ordinal: {text!r} is not an ordinal number")
    return spoken.ordinal(m["n"], options)


def _month(part: str, text: str) -> int:
    value = int(part) if part.isdigit() else _MONTH_NAMES.get(part.lower().rstrip("."), 0)
    if not 1 <= value <= 12:
        raise ValueError(f"say-as date: {part!r} in {text!r} is not a month")
    return value


def _date(text: str, options: NormalizeOptions, fmt: str | None) -> str:
    parts = [p for p in re.split(r"[\s,/.-]+", text) if p]
    if fmt is None:
        fmt = "ymd" if parts and len(parts[0]) == 4 and parts[0].isdigit() else "mdy"
    if fmt not in _DATE_FORMATS:
        raise ValueError(f"say-as date: format {fmt!r} is not one of {', '.join(_DATE_FORMATS)}")
    if len(parts) != len(fmt):
        raise ValueError(f"say-as date: {text!r} does not have the {len(fmt)} parts of {fmt}")
    got = dict(zip(fmt, parts, strict=True))
    year = got.get("y")
    if year is not None and not (year.isdigit() and len(year) in (2, 4)):
        raise ValueError(f"say-as date: {year!r} in {text!r} is not a year")
    if year is not None and len(year) == 2:
        year = "20" + year
    said_year = spoken.year(year, options) if year is not None else ""
    month = _month(got["m"], text) if "m" in got else 0
    day = _day(got["d"], month, text) if "d" in got else 0
    if month and day:
        return dates.say_date(month, day, year, options,
                              day_first=fmt.index("d") < fmt.index("m"))
    if day:
        return f"the {spoken.ordinal(str(day), options)}"
    return " ".join(w for w in (dates.MONTHS[month - 1] if month else "", said_year) if w)


def _day(part: str, month: int, text: str) -> int:
    day = part.lower().removesuffix("st").removesuffix("nd").removesuffix("rd").removesuffix("th")
    if not (day.isascii() and day.isdigit()) or not (
            dates.is_valid(month, int(day)) if month else 1 <= int(day) <= 31):
        raise ValueError(f"say-as date: {part!r} in {text!r} is not a day of that month")
    return int(day)


def _time(text: str, options: NormalizeOptions) -> str:
    if not (clock.CLOCK.fullmatch(text) or clock.HOUR.fullmatch(text)):
        raise ValueError(f"say-as time: {text!r} is not a time")
    return clock.times(text, options)


def _telephone(text: str, options: NormalizeOptions) -> str:
    del options
    if not _PHONE.fullmatch(text) or sum(ch.isdigit() for ch in text) < 3:
        raise ValueError(f"say-as telephone: {text!r} is not a phone number")
    groups = [g for g in re.split(r"[\s().-]+", text.lstrip("+")) if g]
    said = ", ".join(spoken.digits(g, zero="oh") for g in groups)
    return f"plus {said}" if text.startswith("+") else said


def _currency(text: str, options: NormalizeOptions, fmt: str | None) -> str:
    if fmt and _NUMBER.fullmatch(text):
        if fmt.upper() not in money.CODES:
            raise ValueError(f"say-as currency: format {fmt!r} is not a currency code "
                             f"({', '.join(money.CODES)})")
        text = f"{fmt.upper()} {text}"
    if not (money.BEFORE.fullmatch(text) or money.AFTER.fullmatch(text)):
        raise ValueError(f"say-as currency: {text!r} is not an amount with a currency")
    return money.money(text, options)


INTERPRETATIONS = ("characters", "spell-out", "letters", "digits", "cardinal", "number",
                   "ordinal", "date", "time", "telephone", "currency")


def say_as(interpret_as: str, text: str, *, format: str | None = None,
           options: NormalizeOptions | None = None) -> str:
    """The words for ``text`` read as ``interpret_as``; ValueError when it is not that."""
    kind = interpret_as.strip().lower()
    if kind not in INTERPRETATIONS:
        raise ValueError(f"say-as: interpret-as {interpret_as!r} is not supported "
                         f"(one of {', '.join(INTERPRETATIONS)})")
    text = " ".join(text.split())
    if not text:
        raise ValueError(f"say-as {kind}: the text is empty")
    if len(text) > MAX_SAY_AS_CHARS:
        raise ValueError(f"say-as {kind}: {len(text)} characters, more than {MAX_SAY_AS_CHARS}")
    opts = options or NormalizeOptions()
    if kind in ("characters", "spell-out", "letters"):
        return _spell(text)
    if kind == "date":
        return _date(text, opts, format.strip().lower() if format else None)
    if kind == "currency":
        return _currency(text, opts, format)
    readers = {"digits": _digits, "cardinal": _cardinal, "number": _cardinal,
               "ordinal": _ordinal, "time": _time, "telephone": _telephone}
    return readers[kind](text, opts)
