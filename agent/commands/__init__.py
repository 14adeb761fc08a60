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
    from agent.voice.voice import SynthesisParams

__all__ = [
    "MAX_STDIN_BYTES",
    "CommandError",
    "add_config_argument",
    "add_synthesis_arguments",
    "bounded",
    "checked_text",
    "read_text",
    "settings_from_args",
    "synthesis_params",
]

MAX_STDIN_BYTES = 1 << 20


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


def add_synthesis_arguments(parser: argparse.ArgumentParser) -> None:
    """``--voice``, ``--length-scale``, ``--noise-scale``, ``--noise-w``, ``--speaker``."""
    parser.add_argument("--voice", help="voice name (default: models.default_voice)")
    parser.add_argument("--length-scale", type=float, help="speech duration factor (>1 slower)")
    parser.add_argument("--noise-scale", type=float, help="generator noise (0 = deterministic)")
    parser.add_argument("--noise-w", type=float, help="duration noise (0 = deterministic)")
    parser.add_argument("--speaker", type=int, help="speaker id of a multi-speaker voice")


def bounded(value: float | None, name: str, low: float, high: float) -> float | None:
    """``value`` when it lies in [low, high] (or is None); a CommandError otherwise."""
    if value is not None and not low <= value <= high:
        raise CommandError(f"{name} must be between {low} and {high}")
    return value


def synthesis_params(args: argparse.Namespace) -> SynthesisParams:
    """The synthesis parameters given by :func:`add_synthesis_arguments`, range-checked."""
    from agent.voice.voice import SynthesisParams

    return SynthesisParams(
        length_scale=bounded(args.length_scale, "--length-scale", 0.1, 10.0),
        noise_scale=bounded(args.noise_scale, "--noise-scale", 0.0, 2.0),
        noise_w=bounded(args.noise_w, "--noise-w", 0.0, 2.0),
        speaker_id=args.speaker,
    )


def read_text(text: str | None) -> str:
    """``text``, or standard input (at most MAX_STDIN_BYTES) when it is None or ``-``."""
    import sys

    if text is not None and text != "-":
        return text
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise CommandError(f"standard input is larger than {MAX_STDIN_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def checked_text(text: str | None, settings: Settings) -> str:
    """:func:`read_text`, refused early (before any model loads) when it cannot be spoken."""
    from agent.text.frontend import TextError, normalize_text

    text = read_text(text)
    try:
        normalize_text(text, settings.synthesis.max_text_chars)
    except TextError as exc:
        raise CommandError(str(exc)) from exc
    return text
