"""Alphanumeric codes: gates, flights, platforms, seats, rooms, as announcers read them.

The letters are spelled and the number is read in pairs (:func:`letters.announced_number`): codes
of capitals and digits (``B12``), flights (``UA 1234``), numbers of three or four digits after a
code word (:data:`CODE_WORDS`, :data:`CAPITALISED_CODE_WORDS`), a lone capital after one, and
``#`` before a number. Units, times and ordinals are not codes. The rules:
docs/internals.md#normalizer-codes.
"""

from __future__ import annotations

import re

from agent.text.normalize.letters import announced_number, spell, word_set
from agent.text.normalize.options import NormalizeOptions

__all__ = ["CAPITALISED_CODE_WORDS", "CODE_WORDS", "codes"]

CODE_WORDS = word_set("""
    gate gates platform platforms track tracks room rooms terminal coach carriage carousel
    flight flights train bus route berth aisle apartment apt ext extension""")
"""Words after which a number of three or more digits is a code, read in pairs."""
CAPITALISED_CODE_WORDS = word_set("""
    Seat Seats Row Stand Bay Exit Level Floor Door Zone Car Counter Desk Belt Line Bed Ward
    Pier Dock Lane Box Unit Suite Booth Locker Hall Lot""")
"""Words that are codes only with a capital (``Seat 101``; ``we seat 1500 guests`` is not)."""
_UNITS = word_set("""
    GB MB KB TB PB GHZ MHZ KHZ HZ KW MW GW KWH MWH MPH KPH KMH FPS AM PM MM CM KM KG MG ML
    BPM RPM DB ST ND RD TH V W KV MV VA KVA""")
_NOT_FLIGHTS = word_set("""
    AM AN AS AT BE BY DO GO HE IF IN IS IT ME MY NO OF OH OK ON OR PM SO TO UP US WE""")

_HASH = re.compile(r"(?<![\w&#])#\s?(?=\d)")
_FLIGHT = re.compile(r"(?<![\w.,/-])([A-Z]{2}|[A-Z]\d|\d[A-Z]) (\d{1,4})(?![\w/-]|[.,]\d)")
_LETTERS_FIRST = re.compile(r"(?<![\w.,/-])([A-Z]{1,3})(\d{1,4})([A-Z]?)(?![\w/-]|[.,]\d)")
_DIGITS_FIRST = re.compile(r"(?<![\w.,/-])(\d{1,4})([A-Z]{1,3})(?![\w/'-]|[.,]\d)")
_LETTER_AFTER_WORD = re.compile(r"(?<![\w.-])([A-Za-z]{2,12})( {1,3})([A-Z])(?![\w&'-]|\.\w)")
_AFTER_WORD = re.compile(r"(?<![\w.-])([A-Za-z]{2,12})(\.? {1,3})(\d{3,4})"
                         r"(?:(?:\s?[-–—]\s?|\sto\s)(\d{3,4}))?(?![\w/:-]|[.,]\d)")
"""A number after a code word (``Room 101``), or two joined as a range (``Rooms 201–210``)."""
_CODE = r"[A-Z]{1,3}\d{1,4}[A-Z]?|\d{1,4}[A-Z]{1,3}"
_CODE_RANGE = re.compile(rf"(?<![\w.,/-])(?P<a>{_CODE})(?:\s?[–—]\s?|-)(?P<b>{_CODE})"
                         r"(?![\w/-]|[.,]\d)")
"""Two codes of one shape joined by a dash (``B1–B9``, ``3A-3C``): "B one to B nine"."""


def _flight(match: re.Match[str]) -> str:
    if match.group(1) in _NOT_FLIGHTS:
        return match.group(0)
    return f"{spell(match.group(1))} {announced_number(match.group(2))}"


def _letters_first(match: re.Match[str]) -> str:
    said = f"{spell(match.group(1))} {announced_number(match.group(2))}"
    return f"{said} {spell(match.group(3))}" if match.group(3) else said


def _digits_first(match: re.Match[str]) -> str:
    if match.group(2) in _UNITS:
        return match.group(0)
    return f"{announced_number(match.group(1))} {spell(match.group(2))}"


def _is_code_word(word: str) -> bool:
    return word.lower() in CODE_WORDS or (
        not word.islower() and word.capitalize() in CAPITALISED_CODE_WORDS)


def _after_word(match: re.Match[str]) -> str:
    if not _is_code_word(match.group(1)):
        return match.group(0)
    said = f"{match.group(1)}{match.group(2)}{announced_number(match.group(3))}"
    return f"{said} to {announced_number(match.group(4))}" if match.group(4) else said


def _code_range(match: re.Match[str]) -> str:
    """``B1–B9`` "B1 to B9" (each code read after): codes of one shape, not units."""
    a, b = match["a"], match["b"]
    if a[0].isdigit() != b[0].isdigit() or a[-1].isdigit() != b[-1].isdigit():
        return match.group(0)
    if a.lstrip("0123456789") in _UNITS or b.lstrip("0123456789") in _UNITS:
        return match.group(0)
    return f"{a} to {b}"


def _letter_after_word(match: re.Match[str]) -> str:
    if not _is_code_word(match.group(1)):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{spell(match.group(3))}"


def codes(text: str, options: NormalizeOptions) -> str:
    """Codes of letters and digits, flight numbers and ``#`` numbers (see the module)."""
    del options
    if "#" in text:
        text = _HASH.sub("number ", text)
    text = _LETTER_AFTER_WORD.sub(_letter_after_word, text)
    if not any(c.isdigit() for c in text):
        return text
    if any(c in text for c in "-–—"):
        text = _CODE_RANGE.sub(_code_range, text)
    text = _FLIGHT.sub(_flight, text)
    text = _LETTERS_FIRST.sub(_letters_first, text)
    text = _DIGITS_FIRST.sub(_digits_first, text)
    return _AFTER_WORD.sub(_after_word, text)
