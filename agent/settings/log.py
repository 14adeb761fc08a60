"""The ``[log]`` section: log level and format."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.settings.base import Section


class LogSettings(Section):
    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level logged.")
    format: Literal["auto", "json", "console"] = Field(
        default="auto", description="auto: console on a TTY, JSON lines otherwise.")

