"""The bounds of a request's text, written once, and the one check of them
(:func:`text_problem`): the admission of every front door (:mod:`agent.pipeline.admit`), the
protocol schemas and the text frontend use these.

It lives in ``text`` because the frontend (which imports nothing above it) checks the same
bounds again on the text it is handed, and so that the MQTT schemas need not load the
pipeline to check a text (docs/architecture.md).
"""

from __future__ import annotations

import re
from typing import Final, Literal

__all__ = ["DEFAULT_MAX_TEXT_CHARS", "EMPTY", "HARD_MAX_TEXT_CHARS", "NUL", "RAW_FACTOR",
           "TextCode", "text_problem", "too_long"]

TextCode = Literal["bad-request", "empty-text", "bad-text", "text-too-long"]
"""The refusal codes of :func:`text_problem` (those of :class:`agent.pipeline.admit.Code`)."""

HARD_MAX_TEXT_CHARS: Final = 100_000
"""Ceiling of any text bound (the schemas' ``max_length``; ``synthesis.max_text_chars`` and
``wyoming.max_text_chars`` are usually lower)."""
DEFAULT_MAX_TEXT_CHARS: Final = 5000
"""The text bound when none is configured."""
RAW_FACTOR: Final = 4
"""Text over this many times the bound is refused before any work is done on it (the bound
itself applies to the cleaned text)."""

EMPTY: Final = "text is empty"
NUL: Final = "text contains a NUL character"
SURROGATE: Final = "text contains a lone surrogate (U+D800-U+DFFF): it is not valid Unicode"
_SURROGATES: Final = re.compile("[\ud800-\udfff]")


def too_long(limit: int, length: int | None = None) -> str:
    """The reason for a text over ``limit`` characters (``length`` when it was measured)."""
    measured = "" if length is None else f" ({length})"
    return f"text is longer than {limit} characters{measured}"


def text_problem(text: object, max_chars: int) -> tuple[TextCode, str] | None:
    """The code and reason of a request's text outside the bounds, in this order: not a
    string, empty (white space only), a NUL character or a lone surrogate (JSON's ``\\ud800``
    escapes decode to one; no encoder takes it), longer than ``max_chars``."""
    if not isinstance(text, str):
        return "bad-request", "text must be a string"
    if not text.strip():
        return "empty-text", EMPTY
    if "\0" in text:
        return "bad-text", NUL
    if _SURROGATES.search(text):
        return "bad-text", SURROGATE
    if len(text) > max_chars:
        return "text-too-long", too_long(max_chars, len(text))
    return None
