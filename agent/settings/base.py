"""What every settings section shares: frozen, unknown keys refused, and the name rule."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""Device ids, voice and profile names: one topic level, no wildcards, no path separators."""


class Section(BaseModel):
    """A TOML table of the settings: frozen, and an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)
