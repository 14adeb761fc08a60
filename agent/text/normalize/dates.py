"""Dates: ``2026-12-01``, ``March 3rd``, ``Jan. 1``, ``4 July 2026``, ``12/25/2026``, ``3/12``.

Said the way the setting ``date_order`` reads them (``mdy``, ``dmy``, ``ymd``); a written-out
month keeps the order it was written in, ISO dates are year first, and a numeric date without a
year is a date only after a word that announces one. The rules:
docs/internals.md#normalizer-dates.
"""

from __future__ import annotations

import re

from agent.text.normalize import clock, spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["MONTHS", "dates", "is_valid", "say_date"]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

_ABBREVIATIONS = {name[:3]: number for number, name in enumerate(MONTHS, 1)} | {"Sept": 9}
_SHORT = [name for name in _ABBREVIATIONS if name not in MONTHS]
_MONTH = (r"(?P<month>(?:" + "|".join(MONTHS) + r")(?!\w)|(?:" + "|".join(_SHORT)
          + r")(?!\w)\.?)")
"""A month's name, or its abbreviation with or without a dot (a full name keeps its dot)."""
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?(?![\w:]|[.,]\d)"
_YEAR = r"(?:,?\s(?P<year>1\d{3}|20\d{2})(?![\w]|[.,]\d))"

_ISO = re.compile(r"(?<![\w.-])(?P<year>\d{4})-(?P<month>[01]\d)-(?P<day>[0-3]\d)"
                  r"(?:T(?P<time>[0-2]\d:[0-5]\d)(?::[0-5]\d(?:\.\d++)?)?(?:Z|[+-]\d\d:?\d\d)?)?"
                  r"(?![\w-]|\.\d)")
_MONTH_DAY = re.compile(rf"(?<![\w]){_MONTH}\s{_DAY}{_YEAR}?")
_MONTH_YEAR = re.compile(rf"(?<![\w]){_MONTH}\s(?P<year>1\d{{3}}|20\d{{2}})(?!\w|[.,:/-]\d)")
_DAY_MONTH = re.compile(rf"(?<![\w.,/]){_DAY}\s(?:of\s)?{_MONTH}{_YEAR}?")
_NUMERIC = re.compile(r"(?<![\w./-])(?P<a>\d{1,2})(?P<sep>[/.])(?P<b>\d{1,2})"
                      r"(?:(?P=sep)(?P<c>\d{4}|\d{2}))?(?![\w/]|[.,]\d)")

_CONTEXT = frozenset({"on", "until", "till", "from", "due", "by", "since", "before", "after",
                      "date", "dated", "expires", "valid", "through", "thru", "starting",
                      "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                      "sunday", "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri",
                      "sat", "sun"})


def _month_number(name: str) -> int:
    name = name.rstrip(".")
    return MONTHS.index(name) + 1 if name in MONTHS else _ABBREVIATIONS[name]


def is_valid(month: int, day: int) -> bool:
    longest = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    return 1 <= month <= 12 and 1 <= day <= longest[month - 1]


def say_date(month: int, day: int, year: str | None, options: NormalizeOptions, *,
             day_first: bool) -> str:
    """ "December first[ twenty twenty six]" or "the first of December[ ...]"."""
    name, nth = MONTHS[month - 1], spoken.ordinal(str(day), options)
    said = f"the {nth} of {name}" if day_first else f"{name} {nth}"
    return f"{said} {spoken.year(year, options)}" if year else said


def _iso(m: re.Match[str], options: NormalizeOptions) -> str:
    month, day = int(m["month"]), int(m["day"])
    if not is_valid(month, day):
        return m.group(0)
    said = say_date(month, day, m["year"], options, day_first=options.date_order == "dmy")
    return f"{said} at {clock.times(m['time'], options)}" if m["time"] else said


def _written(m: re.Match[str], options: NormalizeOptions, *, day_first: bool) -> str:
    month, day = _month_number(m["month"]), int(m["day"])
    if not is_valid(month, day):
        return m.group(0)
    said = say_date(month, day, m["year"], options, day_first=day_first)
    if day_first and m.string[max(0, m.start() - 4):m.start()].lower() == "the ":
        said = said.removeprefix("the ")  # "on the 3rd of May"
    if m.group(0).endswith("."):  # "12 Dec." ending a sentence keeps its full stop
        rest = m.string[m.end():m.end() + 2]
        if not rest.strip() or rest.strip()[:1].isupper():
            said += "."
    return said


def _announced(text: str, start: int) -> bool:
    """Whether the word before ``start`` announces a date (``on 3/12``, ``Friday 3/12``)."""
    words = text[max(0, start - 12):start].split()
    return bool(words) and words[-1].strip(",").lower() in _CONTEXT


def _numeric(m: re.Match[str], text: str, options: NormalizeOptions) -> str:
    a, b, c, sep = int(m["a"]), int(m["b"]), m["c"], m["sep"]
    if c is None and (sep == "." or not _announced(text, m.start())):
        return m.group(0)
    day_first = sep == "." or options.date_order == "dmy"
    month, day = (b, a) if day_first else (a, b)
    if not is_valid(month, day):  # the other order, where only it is a date (25/12/2026)
        day_first, month, day = not day_first, day, month
        if not is_valid(month, day):
            return m.group(0)
    year = None if c is None else (c if len(c) == 4 else "20" + c)
    return say_date(month, day, year, options, day_first=day_first)


def _year_first(m: re.Match[str], options: NormalizeOptions) -> str:
    month, day = int(m["b"]), int(m["c"])
    if not is_valid(month, day):
        return m.group(0)
    return say_date(month, day, m["a"], options, day_first=options.date_order == "dmy")


_YEAR_FIRST = re.compile(r"(?<![\w./-])(?P<a>\d{4})(?P<sep>[/.])(?P<b>\d{1,2})(?P=sep)"
                         r"(?P<c>\d{1,2})(?![\w/]|[.,]\d)")


def dates(text: str, options: NormalizeOptions) -> str:
    """ISO, written-out and numeric dates in words."""
    text = _ISO.sub(lambda m: _iso(m, options), text)
    text = _MONTH_DAY.sub(lambda m: _written(m, options, day_first=False), text)
    text = _DAY_MONTH.sub(lambda m: _written(m, options, day_first=True), text)
    text = _MONTH_YEAR.sub(lambda m: f"{MONTHS[_month_number(m['month']) - 1]} "
                           f"{spoken.year(m['year'], options)}", text)
    text = _YEAR_FIRST.sub(lambda m: _year_first(m, options), text)
    return _NUMERIC.sub(lambda m: _numeric(m, text, options), text)
