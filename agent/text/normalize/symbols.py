"""Symbols between words in words, and ellipses and dashes as pauses.

:func:`symbols` reads ``&``, ``@``, ``+``, ``=``, ``#``, ``~``, ``/`` between words and the like,
``©`` "copyright" and ``±`` "plus or minus" (after the numbers and addresses); :func:`pauses`
turns an ellipsis or a dash between words into a comma, or "to" between two days or months
(before the numbers). The rules: docs/internals.md#normalizer-symbols-and-pauses.
"""

from __future__ import annotations

import re

from agent.text.normalize.letters import word_set
from agent.text.normalize.options import NormalizeOptions

__all__ = ["pauses", "symbols"]

_SPECIAL = re.compile(r"(?<![\w/])(and/or|w/o|W/O|w/|W/|c/o|C/O|n/a|N/A)(?![\w/])")
_SPECIAL_SAID = {"and/or": "and or", "w/o": "without", "w/": "with", "c/o": "care of",
                 "n/a": "not applicable"}
_SLASH = re.compile(r"(?<![\w/])([A-Za-z]{2,20})/([A-Za-z]{2,20})(?![\w/])")
_SYMBOL = re.compile(r" ?([&@+=#~]) ?")
_SPACES = re.compile(r"  +")
_SIGNS = {"©": "copyright", "±": "plus or minus"}
"""Signs read aloud (the emoji and symbols the frontend drops, ``™ ®``, are not said)."""
_SIGN = re.compile(r" ?([©±]) ?")
_SAID = {"&": "and", "@": "at", "+": "plus", "=": "equals", "#": "hash", "~": "about"}
_ELLIPSIS = re.compile(r"(?<=[\w)\"'\u201d\u2019%]) ?(?:\.\.\.|…)[.…]* ?(?=[\w(\"'\u201c\u2018])")
_AFTER_MARK = re.compile(r"(?<=[,;:!?]) ?(?:\.\.\.|…)[.…]* ?(?=[\w(\"'\u201c\u2018])")
_DASH = re.compile(r"(?<=[\w)\"'\u201d\u2019%]) (?:-{1,3}|[–—]) (?=[\w(\"'\u201c\u2018])"
                   r"|(?<=[A-Za-z])(?:--|[–—])(?=[A-Za-z])")

_LAST_WORD = re.compile(r"[A-Za-z]+\.?$")
_FIRST_WORD = re.compile(r"[A-Za-z]+")
_DAYS_MONTHS = word_set("""
    mon tue tues wed thu thur thurs fri sat sun monday tuesday wednesday thursday friday
    saturday sunday jan feb mar apr jun jul aug sep sept oct nov dec january february march
    april may june july august september october november december""")


def _symbol(text: str, match: re.Match[str]) -> str:
    start, end = match.start(), match.end()
    return (" " if start else "") + _SAID[match.group(1)] + (" " if end < len(text) else "")


def symbols(text: str, options: NormalizeOptions) -> str:
    """``& @ + = # ~`` and ``/`` between words, in words."""
    del options
    if "/" in text:
        text = _SPECIAL.sub(lambda m: _SPECIAL_SAID[m.group(1).lower()], text)
        text = _SLASH.sub(r"\1 or \2", text)
    if "©" in text or "±" in text:
        text = _SIGN.sub(lambda m: (" " if m.start() else "") + _SIGNS[m.group(1)]
                         + (" " if m.end() < len(text) else ""), text)
    if any(c in text for c in "&@+=#~"):
        text = _SPACES.sub(" ", _SYMBOL.sub(lambda m: _symbol(text, m), text))
    return text


def pauses(text: str, options: NormalizeOptions) -> str:
    """Ellipses and dashes between words as commas (a pause espeak-ng keeps)."""
    del options
    if "." in text or "…" in text:
        text = _AFTER_MARK.sub(" ", text)
        text = _ELLIPSIS.sub(", ", text)
    if any(c in text for c in "-–—"):
        text = _DASH.sub(lambda m: _dash(text, m), text)
    return text


def _dash(text: str, match: re.Match[str]) -> str:
    """A comma; "to" between two days or months (``Mon–Fri``); the dash as it was between two
    numbers (``10 - 4``, ``9 – 5``: the numbers' ranges, scores and sums)."""
    start, end = match.start(), match.end()
    if start and end < len(text) and text[start - 1].isdigit() and text[end].isdigit():
        return match.group(0)
    before = _LAST_WORD.search(text, max(0, start - 12), start)
    after = _FIRST_WORD.match(text, end)
    if before and after and before.group(0).lower() in _DAYS_MONTHS and (
            after.group(0).lower() in _DAYS_MONTHS):
        return " to "
    return ", "
