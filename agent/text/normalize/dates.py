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

__all__ = ["MONTHS", "date_ranges", "dates", "is_valid", "say_date"]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

_ABBREVIATIONS = {name[:3]: number for number, name in enumerate(MONTHS, 1)} | {"Sept": 9}
_SHORT = [name for name in _ABBREVIATIONS if name not in MONTHS]
_CAPS = [name.upper() for name in (*MONTHS, *_SHORT) if name != "May"]
_MONTH = (r"(?P<month>(?:" + "|".join(MONTHS) + r")(?!\w)|(?:" + "|".join([*_SHORT, *_CAPS])
          + r")(?!\w)\.?)")
"""A month's name, or its abbreviation with or without a dot (a full name keeps its dot); in
capitals too, as signs write them (``3 NOV``; not ``MAY``, a word as often)."""
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?(?!\w|[.,:]\d)"
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
    name = name.capitalize() if name.isupper() else name
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
    return said + _full_stop(m)


def _full_stop(m: re.Match[str]) -> str:
    """The dot of a month's abbreviation that also ends the sentence (``12 Dec.``)."""
    if m.group(0).endswith("."):
        rest = m.string[m.end():m.end() + 2]
        if not rest.strip() or rest.strip()[:1].isupper():
            return "."
    return ""


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


def _month(group: str) -> str:
    return _MONTH.replace("?P<month>", f"?P<{group}>")


def _day(group: str) -> str:
    return rf"(?P<{group}>[0-3]?\d)(?:st|nd|rd|th)?"


_TO = r"(?:\s?[-–—]\s?|\s(?:to|through|thru)\s)"
_END = r"(?!\w|[.,:]\d|\s?(?i:[ap]\.?m)\b)"
_SPAN_YEAR = _YEAR.replace("?P<year>", "?P<year1>")
_TWO_DATES = re.compile(rf"(?<!\w){_month('m1')}\s{_day('d1')}{_SPAN_YEAR}?{_TO}{_month('m2')}"
                        rf"\s{_day('d2')}{_END}{_YEAR}?")
_TWO_DAY_MONTHS = re.compile(rf"(?<![\w.,/]){_day('d1')}\s{_month('m1')}{_SPAN_YEAR}?{_TO}"
                             rf"{_day('d2')}\s{_month('m2')}{_YEAR}?")
_MONTH_DAYS = re.compile(rf"(?<!\w){_month('m1')}\s{_day('d1')}{_TO}{_day('d2')}{_END}{_YEAR}?")
_DAYS_MONTH = re.compile(rf"(?<![\w.,/:$€£¥-]){_day('d1')}{_TO}{_day('d2')}\s(?:of\s)?"
                         rf"{_month('m1')}{_YEAR}?")
_MONTHS_SPAN = re.compile(rf"(?<!\w){_month('m1')}\s?[-–—]\s?{_month('m2')}")


def _span(m: re.Match[str], options: NormalizeOptions) -> str:
    """Two dates of a range in words, "to" between (``Nov 30 – Dec 3``, ``3–5 June``)."""
    groups = m.groupdict()
    m1, d1 = _month_number(m["m1"]), int(m["d1"])
    m2 = _month_number(groups["m2"]) if groups.get("m2") else m1
    d2 = int(m["d2"])
    if not (is_valid(m1, d1) and is_valid(m2, d2)) or (m1 == m2 and d1 >= d2):
        return m.group(0)
    day_first = m.re in (_TWO_DAY_MONTHS, _DAYS_MONTH)
    if m.re is _MONTH_DAYS:
        said = f"{MONTHS[m1 - 1]} {spoken.ordinal(m['d1'], options)} to " \
               f"{spoken.ordinal(m['d2'], options)}"
    elif m.re is _DAYS_MONTH:
        said = f"the {spoken.ordinal(m['d1'], options)} to the " \
               f"{spoken.ordinal(m['d2'], options)} of {MONTHS[m1 - 1]}"
    else:
        first = say_date(m1, d1, groups.get("year1"), options, day_first=day_first)
        said = f"{first} to {say_date(m2, d2, None, options, day_first=day_first)}"
    if m["year"]:
        said += " " + spoken.year(m["year"], options)
    if day_first and m.string[max(0, m.start() - 4):m.start()].lower() == "the ":
        said = said.removeprefix("the ")  # "from the 3rd to the 5th of June"
    return said + _full_stop(m)


def date_ranges(text: str, options: NormalizeOptions) -> str:
    """Ranges of dates and of months in words (before the dashes become pauses)."""
    if not any(c.isdigit() for c in text) and not any(c in text for c in "-–—"):
        return text
    for pattern in (_TWO_DATES, _TWO_DAY_MONTHS, _MONTH_DAYS, _DAYS_MONTH):
        text = pattern.sub(lambda m: _span(m, options), text)
    return _MONTHS_SPAN.sub(lambda m: f"{MONTHS[_month_number(m['m1']) - 1]} to "
                            f"{MONTHS[_month_number(m['m2']) - 1]}{_full_stop(m)}", text)
