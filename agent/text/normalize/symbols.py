"""Symbols between words in words, and ellipses and dashes as pauses.

:func:`symbols`: ``&`` "and", ``@`` "at", ``+`` "plus", ``=`` "equals", ``#`` "hash" (before
a number it is "number": the codes pass reads those first), ``~`` "about", ``/`` between two
words "or" (``and/or`` "and or", ``yes/no``), ``w/`` "with", ``w/o`` "without", ``c/o`` "care
of", ``N/A`` "not applicable". Run after the numbers and addresses, so ``50 km/h``, ``1/2`` and
``help@example.com`` have their own readings already.

:func:`pauses`: an ellipsis (``...``, ``…``) or a dash between words (`` - ``, ``–``, ``—``,
``--``, spaced or, for the long dashes, not) becomes a comma, the clause mark espeak-ng needs to
pause there (``Gate B12... boarding now``: without one the two words run together). A hyphen
inside a word (``check-in``) stays; an ellipsis at the start or end of the text is left as it
is (the end of the text is a pause already).
"""

from __future__ import annotations

import re

from agent.text.normalize.options import NormalizeOptions

__all__ = ["pauses", "symbols"]

_SPECIAL = re.compile(r"(?<![\w/])(and/or|w/o|W/O|w/|W/|c/o|C/O|n/a|N/A)(?![\w/])")
_SPECIAL_SAID = {"and/or": "and or", "w/o": "without", "w/": "with", "c/o": "care of",
                 "n/a": "not applicable"}
_SLASH = re.compile(r"(?<![\w/])([A-Za-z]{2,20})/([A-Za-z]{2,20})(?![\w/])")
_SYMBOL = re.compile(r" ?([&@+=#~]) ?")
_SAID = {"&": "and", "@": "at", "+": "plus", "=": "equals", "#": "hash", "~": "about"}
_ELLIPSIS = re.compile(r"(?<=[\w)\"'\u201d\u2019%]) ?(?:\.\.\.|…)[.…]* ?(?=[\w(\"'\u201c\u2018])")
_AFTER_MARK = re.compile(r"(?<=[,;:!?]) ?(?:\.\.\.|…)[.…]* ?(?=[\w(\"'\u201c\u2018])")
_DASH = re.compile(r"(?<=[\w)\"'\u201d\u2019%]) (?:-{1,3}|[–—]) (?=[\w(\"'\u201c\u2018])"
                   r"|(?<=[A-Za-z])(?:--|[–—])(?=[A-Za-z])")


def _symbol(text: str, match: re.Match[str]) -> str:
    start, end = match.start(), match.end()
    return (" " if start else "") + _SAID[match.group(1)] + (" " if end < len(text) else "")


def symbols(text: str, options: NormalizeOptions) -> str:
    """``& @ + = # ~`` and ``/`` between words, in words."""
    del options
    if "/" in text:
        text = _SPECIAL.sub(lambda m: _SPECIAL_SAID[m.group(1).lower()], text)
        text = _SLASH.sub(r"\1 or \2", text)
    if any(c in text for c in "&@+=#~"):
        text = _SYMBOL.sub(lambda m: _symbol(text, m), text)
    return text


def pauses(text: str, options: NormalizeOptions) -> str:
    """Ellipses and dashes between words as commas (a pause espeak-ng keeps)."""
    del options
    if "." in text or "…" in text:
        text = _AFTER_MARK.sub(" ", text)
        text = _ELLIPSIS.sub(", ", text)
    if any(c in text for c in "-–—"):
        text = _DASH.sub(", ", text)
    return text
