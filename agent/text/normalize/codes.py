"""Alphanumeric codes: gates, flights, platforms, seats, rooms, as announcers read them.

The letters are spelled and the number is read in pairs (:func:`letters.announced_number`):

- a code of capital letters and digits, as one word: ``B12`` "b twelve", ``UA1234`` "u eh
  twelve thirty four", ``A4`` "eh four", ``12B`` "twelve b", ``9B`` "nine b", ``14C``;
- a flight: two capital letters (or a letter and a digit), a space, one to four digits:
  ``UA 1234``, ``BA 287`` "b eh two eighty seven", ``U2 815``; two letters that are a word
  (``AT 5``, ``NO 7``) are not a flight;
- after a code word, a number of three or four digits is a code too: ``Flight 1234`` "twelve
  thirty four", ``Room 101`` "one oh one"; a shorter one is left for the numbers (``Platform
  9`` "nine"). The code words are :data:`CODE_WORDS` (gate, platform, track, room, flight,
  bus..., in any case) and :data:`CAPITALISED_CODE_WORDS` (``Seat``, ``Row``, ``Exit``,
  ``Level``..., only with a capital: "we seat 1500 guests" is a number);
- one capital letter after a code word is spelled: ``Gate A`` "gate eh", ``Zone C``
  (espeak-ng reads a lone ``A`` before a word as the article);
- ``#`` before a number is "number": ``Room #3`` "Room number three", ``#1`` "number one".

Not codes: lower-case letters after digits (``5km``, ``3pm``, ``1st``: units, times,
ordinals) and a unit in capitals (``2GB``, ``5MHz``, ``100KW``).
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
    BPM RPM DB ST ND RD TH""")
_NOT_FLIGHTS = word_set("""
    AM AN AS AT BE BY DO GO HE IF IN IS IT ME MY NO OF OH OK ON OR PM SO TO UP US WE""")

_HASH = re.compile(r"(?<![\w&#])#\s?(?=\d)")
_FLIGHT = re.compile(r"(?<![\w.,/-])([A-Z]{2}|[A-Z]\d|\d[A-Z]) (\d{1,4})(?![\w/-]|[.,]\d)")
_LETTERS_FIRST = re.compile(r"(?<![\w.,/-])([A-Z]{1,3})(\d{1,4})([A-Z]?)(?![\w/-]|[.,]\d)")
_DIGITS_FIRST = re.compile(r"(?<![\w.,/-])(\d{1,4})([A-Z]{1,3})(?![\w/'-]|[.,]\d)")
_LETTER_AFTER_WORD = re.compile(r"(?<![\w.-])([A-Za-z]{2,12})( {1,3})([A-Z])(?![\w&'-]|\.\w)")
_AFTER_WORD = re.compile(r"(?<![\w.-])([A-Za-z]{2,12})(\.? {1,3})(\d{3,4})(?![\w/:-]|[.,]\d)")


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
    return f"{match.group(1)}{match.group(2)}{announced_number(match.group(3))}"


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
    text = _FLIGHT.sub(_flight, text)
    text = _LETTERS_FIRST.sub(_letters_first, text)
    text = _DIGITS_FIRST.sub(_digits_first, text)
    return _AFTER_WORD.sub(_after_word, text)
