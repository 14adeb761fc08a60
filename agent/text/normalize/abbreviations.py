"""Abbreviations in words, so that their dot does not end a sentence: ``Dr. Smith`` → "doctor
Smith" (one sentence, where espeak-ng made two, with a falling tone inside the name).

Titles and introducing words lose their dot; words that can end a sentence (``St.``, ``Inc.``,
``etc.``) keep it only where a sentence ends; ``St.``/``Dr.`` read by position, ``No.`` and time
units after a number, dotted letters spelled, initials without their dot. The rules:
docs/internals.md#normalizer-abbreviations.
"""

from __future__ import annotations

import re

from agent.text.normalize.letters import spell
from agent.text.normalize.options import NormalizeOptions

__all__ = ["SENTENCE_WORDS", "TITLES", "abbreviations"]

TITLES = {
    "Dr": "doctor", "Mr": "mister", "Mrs": "missus", "Ms": "miz", "Prof": "professor",
    "Capt": "captain", "Lt": "lieutenant", "Sgt": "sergeant", "Col": "colonel",
    "Gov": "governor", "Sen": "senator", "Rep": "representative", "Rev": "reverend",
    "Hon": "honorable", "Fr": "father", "Mt": "mount", "Ft": "fort", "Pres": "president",
    "Supt": "superintendent", "Insp": "inspector", "Det": "detective", "Cpl": "corporal",
    "Apt": "apartment", "Ste": "suite", "Bldg": "building", "Dept": "department",
    "vs": "versus", "approx": "approximately", "cf": "compare", "Approx": "approximately",
    "Fig": "figure", "Figs": "figures", "Vol": "volume", "Ch": "chapter", "Tel": "telephone",
    "tel": "telephone", "Ext": "extension", "ext": "extension", "Ref": "reference",
    "ref": "reference", "Max": "maximum", "max": "maximum", "Temp": "temperature",
    "temp": "temperature", "Avg": "average", "avg": "average", "Qty": "quantity",
    "opp": "opposite", "Opp": "opposite", "nr": "near", "Nr": "near",
}
"""Expanded, and their dot dropped: they stand before what they name."""
SENTENCE_WORDS = {
    "St": "street", "Ave": "avenue", "Rd": "road", "Blvd": "boulevard", "Ln": "lane",
    "Hwy": "highway", "Sq": "square", "Pkwy": "parkway", "Ctr": "center", "Jr": "junior",
    "Sr": "senior", "Inc": "incorporated", "Ltd": "limited", "Corp": "corporation",
    "Co": "company", "Bros": "brothers", "etc": "et cetera", "Etc": "et cetera",
}
"""Expanded; their dot may also end the sentence (kept before a capital or at the end)."""
_NUMBER_WORDS = {"No": "number", "no": "number", "Nos": "numbers", "nos": "numbers",
                 "Nr": "number", "nr": "number"}
_TIME_UNITS = {"min": "minute", "mins": "minutes", "hr": "hour", "hrs": "hours",
               "sec": "second", "secs": "seconds"}

_NAMES = "|".join(sorted({*TITLES, *SENTENCE_WORDS}, key=len, reverse=True))
_DOTTED = re.compile(rf"(?<![\w.])({_NAMES})\.(?=[\s,;:)\"'\u201d\u2019]|$)")
_LATIN = re.compile(r"(?<![\w.])([eE])\.\s?g\.?(?=[\s,;:)]|$)|(?<![\w.])([iI])\.\s?e\.?"
                    r"(?=[\s,;:)]|$)")
_NUMBER = re.compile(r"(?<![\w.])(Nos?|nos?|Nr|nr)\.\s?(?=#?\d)")
_ESTABLISHED = re.compile(r"(?<![\w.])([Ee]st|EST)\.\s?(?=(?:in\s)?[12]\d{3}\b)"
                          r"|(?<![\w.])([Ee]st)\.(?= [a-z\d])|(?<![\w.])(Est)\.(?= )")
"""``Est. 1998`` "established" (before a year); ``est. wait``, ``Est. 20 min`` "estimated"."""
_UNIT = re.compile(r"(?<![\w.])(\d{1,6}(?:\.\d{1,3})?) ?(mins?|hrs?|secs?)\b\.?")
_LETTERS = re.compile(r"(?<![\w.])((?:[A-Z]\.){2,6})(?![\w])")
_INITIAL = re.compile(r"(?<![\w.])([B-HJ-Z])\.(?= [A-Z][a-z])")
_SAID_TITLES = frozenset(TITLES.values())
_NOT_BEFORE_INITIAL = frozenset({"Gate", "Platform", "Plan", "Seat", "Row", "Zone", "Terminal",
                                 "Exit", "Level", "Track", "Stand", "Bay", "Door", "Vitamin",
                                 "Type", "Class", "Grade", "Car", "Coach", "Wing", "Block"})
_BARE_ST = re.compile(r"(?<=[A-Za-z] )St\b(?!\.)(?=\s*(?:$|[,;:!?]|[a-z]))")
_CAPITAL_NEXT = re.compile(r"[\"')\u201d\u2019]?\s+[A-Z]")
_END = re.compile(r"[\"')\u201d\u2019]*\s*$")
_WORD_BEFORE = re.compile(r"(?:^|\s)([A-Za-z0-9]+)[,]?\s+$")


def _capitalised(word: str) -> bool:
    return bool(word) and word[0].isupper() and (len(word) == 1 or word[1:].islower())


def _before(text: str, start: int) -> str:
    found = _WORD_BEFORE.search(text, max(0, start - 40), start)
    return found.group(1) if found else ""


def _dot(text: str, end: int, *, sentence: bool) -> str:
    """The abbreviation's dot, when it also ends the sentence."""
    if _END.fullmatch(text, end):
        return "."
    return "." if sentence and _CAPITAL_NEXT.match(text, end) else ""


def _dotted(text: str, match: re.Match[str]) -> str:
    name, end = match.group(1), match.end()
    before = _before(text, match.start())
    name_follows = bool(re.match(r"\s+[A-Z][a-z]", text[end:end + 3]))
    if name in ("St", "Dr"):
        after_name = _capitalised(before) or before.isdigit()
        if name_follows and not after_name:
            return ("saint" if name == "St" else "doctor") + _dot(text, end, sentence=False)
        if name == "Dr" and not after_name:
            return "doctor" + _dot(text, end, sentence=False)
        return ("street" if name == "St" else "drive") + _dot(text, end, sentence=True)
    if name in TITLES:
        return TITLES[name] + _dot(text, end, sentence=False)
    return SENTENCE_WORDS[name] + _dot(text, end, sentence=True)


def _initial(text: str, match: re.Match[str]) -> str:
    """A name's initial (``John F. Kennedy``, ``J. Smith``) loses its dot; a letter after a
    code word (``Gate B. Then``) keeps it, and A and I are words."""
    before = _before(text, match.start())
    if before in _NOT_BEFORE_INITIAL or (
            before and not _capitalised(before) and before not in _SAID_TITLES):
        return match.group(0)
    return match.group(1)


def _letters(text: str, match: re.Match[str]) -> str:
    if match.group(1) in ("A.M.", "P.M."):
        return match.group(0)
    return spell(match.group(1)) + _dot(text, match.end(), sentence=False)


def _latin(text: str, match: re.Match[str]) -> str:
    said = "for example" if match.group(1) else "that is"
    return said + _dot(text, match.end(), sentence=False)


def _unit(text: str, match: re.Match[str]) -> str:
    unit = _TIME_UNITS[match.group(2)].rstrip("s")
    one = match.group(1) in ("1", "1.0")
    dot = _dot(text, match.end(), sentence=True) if match.group(0).endswith(".") else ""
    return f"{match.group(1)} {unit if one else unit + 's'}{dot}"


def abbreviations(text: str, options: NormalizeOptions) -> str:
    """Abbreviations in words, their dots kept only where they end a sentence."""
    del options
    if "." in text:
        text = _NUMBER.sub(lambda m: _NUMBER_WORDS[m.group(1)] + " ", text)
        text = _ESTABLISHED.sub(lambda m: "established " if m.group(1) else "estimated", text)
        text = _LATIN.sub(lambda m: _latin(text, m), text)
        text = _LETTERS.sub(lambda m: _letters(text, m), text)
        text = _DOTTED.sub(lambda m: _dotted(text, m), text)
        text = _INITIAL.sub(lambda m: _initial(text, m), text)
    if "St" in text:
        text = _BARE_ST.sub(lambda m: "street" if _capitalised(_before(text, m.start()))
                            else m.group(0), text)
    if any(c.isdigit() for c in text):
        text = _UNIT.sub(lambda m: _unit(text, m), text)
    return text
