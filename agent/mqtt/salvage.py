"""A few top-level string fields read from a payload that failed to parse, with bounded work.

A rejected command is answered under the sender's own ``id`` whenever it can be read (and a
Hermes error addressed to its site and session). :func:`top_level_strings` does not parse the
payload: one bounded scan, no recursion, no number conversion. What it returns is untrusted:
callers validate a value before they use it. The design:
docs/internals.md#salvaging-fields-of-a-bad-payload.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_VALUE_CHARS", "TopLevel", "top_level_strings"]

MAX_VALUE_CHARS: Final = 1024
"""Longest string literal (as sent, escapes included) a salvaged value may have."""

_SCAN = re.compile(r'["{}\[\]]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""The rest of a string literal after its opening quote (linear: the pieces cannot overlap)."""
_COLON = re.compile(r"[ \t\r\n]*:[ \t\r\n]*")


@dataclass(frozen=True, slots=True)
class TopLevel:
    """What the scan found in a payload that starts as a JSON object."""

    strings: dict[str, str] = field(default_factory=dict)
    """The wanted keys whose value is a string (the last one when a key repeats, as JSON
    parsers do), decoded from JSON; may hold lone surrogates."""
    closed: bool = False
    """Whether the top-level object ended within the scanned bytes (else a wanted key may
    still have come later)."""


def _string_end(text: str, after_quote: int) -> int | None:
    """Index just past the closing quote of the string whose opening quote ends at
    ``after_quote``; ``None`` when it is not terminated."""
    match = _STRING_REST.match(text, after_quote)
    return None if match is None else match.end()


def _value_after(text: str, key_end: int) -> tuple[str | None, int]:
    """The string value after the key that ends at ``key_end`` and where the scan goes on."""
    colon = _COLON.match(text, key_end)
    if colon is None or not text.startswith('"', colon.end()):
        return None, key_end  # not a key, or a value that is not a string
    start = colon.end()
    end = _string_end(text, start + 1)
    if end is None:
        return None, start  # the scan stops at this unterminated string
    if end - start > MAX_VALUE_CHARS:
        return None, end
    try:
        value = json.loads(text[start:end])  # one string literal: no nesting, no numbers
    except ValueError:
        return None, end
    return (value if isinstance(value, str) else None), end


def top_level_strings(payload: bytes, names: Collection[str], *,
                      max_bytes: int) -> TopLevel | None:
    """The string values of the keys ``names`` of the top-level JSON object in ``payload``.

    ``None`` when the payload does not start as a JSON object. Only the first ``max_bytes``
    bytes are looked at; the scan stops at the end of the top-level object or at a string
    that is not terminated. Keys are compared as sent (a key spelled with escapes is not
    recognised).
    """
    text = payload[:max_bytes].decode("utf-8", errors="replace")
    start = len(text) - len(text.lstrip(" \t\r\n"))
    if not text.startswith("{", start):
        return None
    wanted = {f'"{name}"': name for name in names}
    longest = max((len(key) for key in wanted), default=0)
    found: dict[str, str] = {}
    depth, pos = 0, start
    while (match := _SCAN.search(text, pos)) is not None:
        char, pos = match.group(), match.end()
        if char != '"':
            depth += 1 if char in "{[" else -1
            if depth == 0:
                return TopLevel(found, closed=True)
            continue
        end = _string_end(text, pos)
        if end is None:
            break
        pos = end
        if depth == 1 and end - match.start() <= longest:
            name = wanted.get(text[match.start():end])
            if name is not None:
                value, pos = _value_after(text, end)
                if value is not None:
                    found[name] = value
    return TopLevel(found, closed=False)
