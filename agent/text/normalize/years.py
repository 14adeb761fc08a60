"""Years and decades: ``in 1999`` "in nineteen ninety nine", ``the 1990s``, ``the '80s``.

A four-digit number from 1000 to 2099 is read as a year after a word that announces one
(``in``, ``since``, ``from``, ``until``, ``by``, ``year``, ``founded``, ``built``, ``class of``,
a season...), between "the" and a word like ``season``, ``edition``, ``timetable`` (``the 2026
season``), or before ``AD``/``BC``/``CE``/``BCE``; elsewhere it is a number (``1500 seats``
"one thousand five hundred seats"). The convention (:func:`spoken.year`): 1999 "nineteen
ninety nine", 1905 "nineteen oh five", 1900 "nineteen hundred", 2000-2009 "two thousand
five", 2010-2099 "twenty twenty six". Decades: ``1990s`` "nineteen nineties", ``2000s`` "two
thousands", ``'80s`` "eighties". Year ranges are the ranges pass's.
"""

from __future__ import annotations

import re

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["FOLLOWING_WORDS", "YEAR_WORDS", "years"]

YEAR_WORDS = frozenset({
    "in", "since", "from", "until", "till", "to", "by", "before", "after", "during", "year",
    "circa", "c.", "ca.", "around", "early", "late", "mid", "of", "founded", "built", "opened",
    "established", "est.", "born", "died", "spring", "summer", "autumn", "fall", "winter",
    "season", "copyright", "©", "vintage", "model", "class",
})

_YEAR = re.compile(r"(?<![\w.,$€£¥#-])(?P<year>1\d{3}|20\d{2})"
                   r"(?P<era>\s(?:AD|BC|BCE|CE)\b)?(?!\w|[.,:/]\d|-\d)")
_DECADE = re.compile(r"(?<![\w.,$€£¥#-])(?P<year>1\d{2}0|20\d0)'?s\b")
_SHORT_DECADE = re.compile(r"(?:(?<![\w])['’]|(?<=\b[Tt]he\s)|(?<=\bTHE\s))(?P<tens>[2-9]0)'?s\b")


def _announced(text: str, start: int) -> bool:
    """After a year word (``in 1999``), or ``year is``/``year was`` (``The year is 2026``)."""
    words = [w.lower() for w in text[max(0, start - 20):start].split()]
    if words and words[-1] in YEAR_WORDS:
        return True
    return len(words) >= 2 and words[-2] == "year" and words[-1] in ("is", "was", "will")


FOLLOWING_WORDS = frozenset({
    "season", "edition", "model", "census", "election", "elections", "olympics", "budget",
    "calendar", "timetable", "schedule", "festival", "championship", "championships", "tour",
    "vintage", "collection", "winter", "summer", "spring", "autumn", "fall",
})
"""After "the" and before one of these, four digits are a year: ``the 2026 season``."""


def _followed(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 5):start].lower()
    after = text[end:end + 16].split()
    return (before.endswith("the ") and bool(after)
            and after[0].lower().strip(".,;:!?") in FOLLOWING_WORDS)


def _year(m: re.Match[str], text: str, options: NormalizeOptions) -> str:
    era = m["era"]
    if not era and not _announced(text, m.start()) and not _followed(text, m.start(), m.end()):
        return m.group(0)
    said = spoken.year(m["year"], options)
    return said + (era or "")


def years(text: str, options: NormalizeOptions) -> str:
    """Decades, and four-digit years where the words around announce a year."""
    text = _DECADE.sub(lambda m: spoken.plural(spoken.year(m["year"], options)), text)
    text = _SHORT_DECADE.sub(lambda m: spoken.plural(spoken.cardinal(m["tens"], options)), text)
    return _YEAR.sub(lambda m: _year(m, text, options), text)
