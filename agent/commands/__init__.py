"""Sub-commands of ``tts-agent``, one module each.

Every module here defines ``register(subparsers)``, which adds its parser and sets
``handler`` to a function ``(args) -> exit status``. Handlers report expected
failures by raising :class:`CommandError` (printed as one line, no traceback).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.settings import Settings

__all__ = ["CommandError", "add_config_argument", "settings_from_args"]


class CommandError(Exception):
    """An expected failure of a command: bad input, missing voice, unreachable device."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def settings_from_args(args: argparse.Namespace, *, configure_logs: bool = True) -> Settings:
    """Load the settings named by ``--config`` and configure logging from them."""
    from agent.logs import configure_logging
    from agent.settings import load_settings

    config: Path | None = getattr(args, "config", None)
    settings = load_settings(config)
    if configure_logs:
        configure_logging(settings.log.level, settings.log.format)
    return settings


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """Accept ``--config PATH`` after the sub-command name too (``tts-agent synth --config F``)."""
    parser.add_argument(
        "--config", type=Path, default=argparse.SUPPRESS,
        help="TOML settings file (default /etc/tts-agent/agent.toml when it exists)",
    )
