"""Weekday abbreviations in words: ``Mon 3 Nov`` "Monday 3 Nov", ``Tue., Sept. 9``, ``Mon–Fri``.

``Mon Tue Tues Wed Weds Thu Thur Thurs Fri`` (capitalised or in capitals) are weekdays wherever
they stand. ``Sat`` and ``Sun`` are words too (the Sun, sat down), so they are weekdays only with
a dot (``Sun.``), before a date or a time (``Sat 10-4``, ``Sun 14 Dec``), next to another weekday
(``Sat–Sun``, ``Fri & Sat``) or after a word that announces a day (``closed Sun``). The dot goes,
unless it also ends the sentence. Runs before the words in capitals, so ``MON–FRI`` is read as
days. The rules: docs/internals.md#normalizer-dates.
"""

from __future__ import annotations

import re

from agent.text.normalize.dates import MONTHS
from agent.text.normalize.options import NormalizeOptions

__all__ = ["WEEKDAYS", "weekdays"]

WEEKDAYS = {"mon": "Monday", "tue": "Tuesday", "tues": "Tuesday", "wed": "Wednesday",
            "weds": "Wednesday", "thu": "Thursday", "thur": "Thursday", "thurs": "Thursday",
            "fri": "Friday", "sat": "Saturday", "sun": "Sunday"}
"""Abbreviations and the day they name."""
_WORDS = {"sat", "sun"}
"""Abbreviations that are also English words: weekdays only in context."""

_NAMES = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_DAY = re.compile(rf"(?<![\w'’.@/-])(?P<name>(?i:{_NAMES}))(?P<dot>\.)?(?![\w'’@]|\.\w)")
_MONTH_NAMES = (*MONTHS, *(name[:3] for name in MONTHS), "Sept")
_MONTHS = "(?:" + "|".join([*_MONTH_NAMES, *(n.upper() for n in _MONTH_NAMES)]) + r")\b"
_AFTER = re.compile(rf"\.?,?\s?(?:\d|{_MONTHS})")
"""After an abbreviation, what makes it a date's weekday: a number or a month."""
_FULL = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_JOINED = re.compile(rf"\.?(?:\s?[-–—&/+,]\s?|\s(?:to|and|or|&)\s)(?i:(?:{_NAMES}|{_FULL})\b)")
"""After an abbreviation, another day joined to it (``Sat–Sun``, ``Sat and Sun``)."""
_JOINED_BEFORE = re.compile(rf"(?i:\b(?:{_NAMES}|{_FULL}))\.?"
                            r"(?:\s?[-–—&/+,]\s?|\s(?:to|and|or|&)\s)$")
_PAIR = re.compile(rf"(?<![\w'’.@/-])(?P<a>(?i:{_NAMES}|{_FULL}))\.?\s?[-–—]\s?"
                   rf"(?P<b>(?i:{_NAMES}|{_FULL}))(?P<dot>\.)?(?![\w'’@-]|\.\w)")
"""Two days joined by a dash (``Mon–Fri``, ``SAT-SUN``): "Monday to Friday"."""
_ANNOUNCING = frozenset({"on", "every", "until", "till", "til", "from", "by", "closed", "open",
                         "opens", "next", "this", "last", "before", "after", "except", "due",
                         "excl", "incl", "thru", "through"})
_NOT_A_DAY = frozenset({"the", "a", "an", "my", "your", "our", "their", "his", "her"})


def _capitalised(name: str) -> bool:
    return name[0].isupper() and (name[1:].islower() or name[1:].isupper())


def _is_weekday(text: str, m: re.Match[str]) -> bool:
    name = m["name"]
    if not _capitalised(name):
        return False
    if name.lower() not in _WORDS:
        return True
    words = text[max(0, m.start() - 16):m.start()].split()
    before = words[-1].lower().strip(",:;") if words else ""
    if before in _NOT_A_DAY:
        return False
    if m["dot"] or before in _ANNOUNCING:
        return True
    if _AFTER.match(text, m.end()) or _JOINED.match(text, m.end()):
        return True
    return bool(_JOINED_BEFORE.search(text, max(0, m.start() - 16), m.start()))


def _dot(text: str, end: int) -> str:
    """The dot when it also ends the sentence (at the end, or before a word that is no date)."""
    rest = text[end:end + 12]
    if not rest.strip():
        return "."
    following = rest.lstrip()
    if rest[:1].isspace() and following[:1].isupper():
        return "" if re.match(_MONTHS, following) or _DAY.match(following) else "."
    return ""


def weekdays(text: str, options: NormalizeOptions) -> str:
    """Weekday abbreviations as the day's name (see the module)."""
    del options

    def say(m: re.Match[str]) -> str:
        if not _is_weekday(text, m):
            return m.group(0)
        return WEEKDAYS[m["name"].lower()] + (_dot(text, m.end()) if m["dot"] else "")

    def pair(m: re.Match[str]) -> str:
        if not (_capitalised(m["a"]) and _capitalised(m["b"])):
            return m.group(0)
        end = _dot(text, m.end()) if m["dot"] else ""
        return f"{_name(m['a'])} to {_name(m['b'])}{end}"

    if any(c in text for c in "-–—"):
        text = _PAIR.sub(pair, text)
    return _DAY.sub(say, text)


def _name(word: str) -> str:
    return WEEKDAYS.get(word.lower()) or word.capitalize()
