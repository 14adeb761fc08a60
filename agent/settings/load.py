"""Reading the settings: :func:`load_settings` from the TOML file and the environment.

Unknown keys are errors, in the file and in the environment, so a typo never silently falls
back to a default; path settings are absolute once read (:mod:`agent.settings.paths`).
Secrets are :class:`pydantic.SecretStr` and may be read from files (systemd credentials).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic_settings import SettingsConfigDict

from agent.settings.errors import ConfigError, describe, unknown_variables, unparsable
from agent.settings.root import DEFAULT_CONFIG_PATH, Settings

MAX_CONFIG_BYTES = 1 << 20


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Read the settings from ``config`` (or the default file when it exists) and the environment.

    Raises :class:`ConfigError` with one line per problem: a missing, unreadable or oversized
    file, bad TOML, unknown settings (in the file or the environment) and values that fail
    validation, each naming where it came from.
    """
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    path = config
    if path is None and DEFAULT_CONFIG_PATH.is_file():
        path = DEFAULT_CONFIG_PATH
    if path is not None:
        path = Path(os.path.abspath(path))
    data = _read_toml(path) if path is not None else {}

    class _FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    problems = list(unknown_variables())
    cause: Exception | None = None
    try:
        settings = _FileSettings(**overrides)
    except ValidationError as exc:
        problems += [describe(err, path, data) for err in exc.errors()]
        cause = exc
    except SettingsError as exc:
        problems.append(unparsable(str(exc)))
        cause = exc
    if problems:
        raise ConfigError(*problems) from cause
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
