"""Settings problems in the agent's words: :class:`ConfigError`, one line per problem.

Each line says where a value came from (the file or its environment variable), which setting,
and what is wrong, with "did you mean" for a close name; values are never shown (a number out
of bounds apart), so secrets are not either.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent.settings.base import NAME_PATTERN
from agent.settings.root import ENV_PREFIX, OTHER_VARIABLES, Settings


class ConfigError(Exception):
    """The configuration could not be read or is invalid: :attr:`problems`, one line each."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def _fields(loc: tuple[str, ...]) -> dict[str, Any]:
    """The fields of the settings model at ``loc`` (empty when ``loc`` is no section)."""
    model: type[BaseModel] = Settings
    for part in loc:
        info = model.model_fields.get(part)
        inner = info.annotation if info is not None else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return {}
        model = inner
    return dict(model.model_fields)


def env_names(loc: tuple[str, ...] = ()) -> Iterator[str]:
    """Every environment variable that names a setting or a section, below ``loc``."""
    for name in _fields(loc):
        yield ENV_PREFIX + "__".join((*loc, name)).upper()
        yield from env_names((*loc, name))


def _environment() -> dict[str, str]:
    """The ``TTS_AGENT_`` variables of the environment, by upper-case name."""
    return {key.upper(): key for key in os.environ if key.upper().startswith(ENV_PREFIX)}


def _suggest(word: str, candidates: Iterator[str] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def unknown_variables() -> Iterator[str]:
    """One line per ``TTS_AGENT_`` variable whose first part names no top-level setting
    (pydantic-settings ignores those; a nested unknown one is a validation error)."""
    known = list(env_names())
    for upper, key in sorted(_environment().items()):
        rest = upper[len(ENV_PREFIX):]
        if any(rest == other or (other.endswith("*") and rest.startswith(other[:-1]))
               for other in OTHER_VARIABLES):
            continue
        if rest.split("__")[0].lower() not in Settings.model_fields:
            yield f"{key}: unknown setting{_suggest(upper, known)}"


def _elsewhere(keys: tuple[str, ...], env: bool) -> str:
    """A key written in the wrong table (``host`` above ``[mqtt]``): the setting of that name
    in another section, when there is exactly one."""
    names = [name for name in env_names() if name.endswith(("__" if env else "") + keys[-1].upper())
             and (env or name[len(ENV_PREFIX):].split("__")[-1] == keys[-1].upper())]
    if len(names) != 1:
        return ""
    path = names[0][len(ENV_PREFIX):].lower().split("__")
    return f" (did you mean {names[0] if env else '.'.join(path)}?)"


def _loc_text(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "settings"


def _origin(keys: tuple[str, ...], path: Path | None, data: dict[str, Any]) -> str:
    """Where the value at ``keys`` came from: its environment variable, else the file."""
    environment = _environment() if keys and keys[0] in Settings.model_fields else {}
    for depth in range(len(keys), 0, -1):
        name = ENV_PREFIX + "__".join(keys[:depth]).upper()
        if name in environment:
            return environment[name]
    node: Any = data
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return str(path) if path is not None and (node is not None or not keys) else ""


def describe(err: Any, path: Path | None, data: dict[str, Any]) -> str:
    """One pydantic error as one line in the agent's words: where, which setting, what is wrong.

    The value is shown only for a number out of bounds: a secret never is."""
    loc = tuple(err["loc"])
    keys = tuple(part for part in loc if isinstance(part, str))
    origin = _origin(keys, path, data)
    prefix = f"{origin}: " if origin else ""
    if err["type"] == "extra_forbidden":
        env = origin.upper().startswith(ENV_PREFIX)
        candidates = (list(env_names(keys[:-1])) if env
                      else [_loc_text((*keys[:-1], name)) for name in _fields(keys[:-1])])
        word = origin.upper() if env else _loc_text(keys)
        hint = _suggest(word, candidates) or _elsewhere(keys, env)
        return f"{prefix}unknown setting {_loc_text(keys)}{hint}"
    problem = _problem(err)
    return f"{prefix}{_loc_text(loc)}{'' if problem.startswith(':') else ' '}{problem}"


_NAME_RULE = ("must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or a "
              "digit")
_KINDS = {"int": "a whole number", "float": "a number", "bool": "true or false",
          "string": "text (a quoted string)", "list": "a list", "tuple": "a list",
          "dict": "a table", "model": "a table", "path": "a path", "literal": "",
          "enum": "", "finite": "a finite number", "model_attributes": "a table"}
_BOUNDS = {"greater_than_equal": ("ge", "at least"), "less_than_equal": ("le", "at most"),
           "greater_than": ("gt", "more than"), "less_than": ("lt", "less than")}


def _problem(err: Any) -> str:
    """What is wrong with one value, without the value (numbers out of bounds apart)."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        shown = err.get("input")
        got = f" (got {shown})" if isinstance(shown, int | float | str) and \
            re.fullmatch(r"-?[0-9.eE+-]{1,32}", str(shown)) else ""
        return f"must be {words} {ctx.get(key)}{got}"
    if kind in ("string_too_short", "string_too_long", "too_short", "too_long"):
        unit = "characters" if kind.startswith("string") else "items"
        short = kind.endswith("short")
        size = ctx.get("min_length") if short else ctx.get("max_length")
        unit = unit[:-1] if size == 1 else unit
        return f"must have at {'least' if short else 'most'} {size} {unit}"
    pattern = ctx.get("pattern")
    simple = {"missing": "is required", "literal_error": f"must be one of {ctx.get('expected')}",
              "string_pattern_mismatch": _NAME_RULE if pattern == NAME_PATTERN
              else f"must match {pattern}",
              "value_error": ": " + re.sub(r"^Value error, ", "", str(err["msg"])),
              "assertion_error": ": " + re.sub(r"^Assertion error, ", "", str(err["msg"]))}
    if kind == "enum":
        return f"must be one of {ctx.get('expected')}"
    base = kind.rsplit("_", 1)[0] if kind.endswith(("_type", "_parsing")) else kind
    base = "int" if kind == "int_from_float" else base
    if kind not in simple and _KINDS.get(base):
        return f"must be {_KINDS[base]}"
    return simple.get(kind, ": " + str(err["msg"]))


def unparsable(message: str) -> str:
    """pydantic-settings' SettingsError (a variable that is not valid JSON) in our words."""
    found = re.search(r'field "([^"]+)"', message)
    field = found.group(1) if found else "a setting"
    return (f"{ENV_PREFIX}{field.upper()}...: cannot read {field} from the environment: lists and "
            f"tables are written in JSON, e.g. {ENV_PREFIX}MQTT__GROUPS='[\"kitchen\"]'")
