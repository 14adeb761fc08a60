"""Letters spelled one by one and digits read as announcers read them (shared by the passes).

Spelled letters are written lower case, one per word (``"USB"`` → ``"u s b"``), which espeak-ng
reads as letter names, except ``a``: alone before another word espeak-ng reads it as the
article (``ɐ``), so the letter A is written ``eh``, which every English espeak-ng voice reads as
the letter's name (``eɪ``). Lower case also keeps the later passes (Roman numerals,
initialisms) from reading spelled letters again.
"""

from __future__ import annotations

from agent.text.normalize.spoken import num2words

__all__ = ["DIGITS", "announced_number", "digits", "spell", "word_set"]

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_LETTER_A = "eh"


def word_set(text: str) -> frozenset[str]:
    """The words of a text, as a set (the passes' word lists are written as one string)."""
    return frozenset(text.split())


def spell(text: str) -> str:
    """Each letter by its name and each digit as a word, one per word (``A4`` → ``eh four``).

    Anything else (a hyphen, a dot) is left out: the caller chooses what to say for it.
    """
    out: list[str] = []
    for char in text:
        if char.isascii() and char.isalpha():
            out.append(_LETTER_A if char in "aA" else char.lower())
        elif char.isascii() and char.isdigit():
            out.append(DIGITS[int(char)])
    return " ".join(out)


def digits(text: str, *, zero: str = "zero") -> str:
    """Digit by digit (``"0123"`` → ``"zero one two three"``, or ``oh`` with ``zero="oh"``)."""
    return " ".join(zero if d == "0" else DIGITS[int(d)] for d in text if d.isascii()
                    and d.isdigit())


def _pair(text: str) -> str:
    """Two digits as announced: ``12`` twelve, ``05`` oh five, ``00`` hundred."""
    if text == "00":
        return "hundred"
    if text[0] == "0":
        return "oh " + DIGITS[int(text[1])]
    return str(num2words(int(text), lang="en")).replace("-", " ")


def announced_number(text: str) -> str:
    """A code's number as announcers read it (flights, gates, trains, rooms).

    One or two digits as a number (``9`` nine, ``12`` twelve); three as the first digit and a
    pair (``123`` one twenty three, ``105`` one oh five, ``100`` one hundred); four as two
    pairs (``1234`` twelve thirty four, ``1200`` twelve hundred, ``2000`` two thousand);
    a leading zero or five digits and more: digit by digit, zero as ``oh`` (``007``).
    """
    if not text or not text.isascii() or not text.isdigit():
        raise ValueError(f"{text!r} is not a number")
    if (text[0] == "0" and len(text) > 1) or len(text) > 4:
        return digits(text, zero="oh")
    if len(text) <= 2:
        return str(num2words(int(text), lang="en")).replace("-", " ")
    if len(text) == 3:
        head = DIGITS[int(text[0])]
        return f"{head} hundred" if text[1:] == "00" else f"{head} {_pair(text[1:])}"
    if text[1:] == "000":
        return f"{DIGITS[int(text[0])]} thousand"
    return f"{_pair(text[:2])} {_pair(text[2:])}"
