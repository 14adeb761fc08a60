"""Bounded JSON: a size limit and a nesting limit, both checked before the parser runs.

Every JSON from outside (MQTT commands, Hermes, the Home Assistant notify topic, Wyoming
events, retained status read by ``fleet``, a bundle's manifest, signature and voice config, a
JSON lexicon) goes through :func:`loads` (or :func:`depth_error` before pydantic's parser;
the table: docs/internals.md#bounded-json): the nesting is measured by one linear scan
outside strings, so no parser is ever handed input deep enough to recurse without end
(``RecursionError``); a number literal longer than :data:`MAX_NUMBER_CHARS`, ``NaN``,
``Infinity`` or a float out of range is refused with its reason. See docs/architecture.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_DEPTH", "MAX_NUMBER_CHARS", "JsonError", "TooDeep", "check", "depth_error",
           "loads"]

MAX_DEPTH: Final = 200
"""Deepest nesting of arrays and objects accepted (pydantic's JSON parser stops at 200 too)."""

MAX_NUMBER_CHARS: Final = 100
"""Longest number literal accepted: no setting, count or size needs more (Python's ``int()``
refuses above 4,300 digits, with a message about ``sys.set_int_max_str_digits``)."""

_TOKEN = re.compile(r'["\[\]{}]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""The rest of a string literal after its opening quote (linear: the pieces cannot overlap)."""


class JsonError(ValueError):
    """JSON that is refused: too large, nested too deeply, not UTF-8 or malformed. The
    message is one line meant for the sender."""


class TooDeep(JsonError):
    """JSON nested deeper than the limit."""


def _long(literal: str) -> JsonError | None:
    if len(literal) > MAX_NUMBER_CHARS:
        return JsonError(f"number too long: {len(literal)} characters, limit {MAX_NUMBER_CHARS}")
    return None


def _int(literal: str) -> int:
    if (error := _long(literal)) is not None:
        raise error
    return int(literal)


def _float(literal: str) -> float:
    if (error := _long(literal)) is not None:
        raise error
    value = float(literal)
    if not math.isfinite(value):
        raise JsonError(f"number out of range: {literal}")
    return value


def _constant(name: str) -> float:
    raise JsonError(f"not a JSON number: {name}")


def depth_error(text: str | bytes, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``text`` nests too deeply (``nested too deeply: ...``), or None.

    One scan, linear in the length: brackets inside string literals do not count; an
    unterminated string ends the scan (the parser then says what is wrong)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = pos = 0
    while (match := _TOKEN.search(text, pos)) is not None:
        char, pos = match.group(), match.end()
        if char == '"':
            rest = _STRING_REST.match(text, pos)
            if rest is None:
                return None
            pos = rest.end()
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return f"nested too deeply: more than {max_depth} levels at character {pos}"
        else:
            depth -= 1
    return None


def check(data: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`JsonError` when ``data`` is over ``max_bytes`` (its length, bytes or
    characters) or :class:`TooDeep` when it nests deeper than ``max_depth``."""
    if len(data) > max_bytes:
        raise JsonError(f"JSON too large: {len(data)} bytes, limit {max_bytes}")
    why = depth_error(data, max_depth)
    if why is not None:
        raise TooDeep(why)


def loads(data: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> object:
    """``json.loads`` of ``data`` within the bounds; raises :class:`JsonError` (never
    ``RecursionError``, nor ``int()``'s digit limit). Bytes must be UTF-8. ``object_pairs_hook``
    is ``json.loads``'s (a ``ValueError`` it raises is reported as malformed JSON)."""
    check(data, max_bytes=max_bytes, max_depth=max_depth)
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant,
                          object_pairs_hook=object_pairs_hook)
    except JsonError:
        raise
    except UnicodeDecodeError as exc:
        raise JsonError(f"not UTF-8: {exc.reason}") from None
    except ValueError as exc:
        raise JsonError(f"malformed JSON: {exc}") from None
