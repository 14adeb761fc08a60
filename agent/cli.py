"""The ``tts-agent`` command line: parse arguments, load settings, hand over.

Each sub-command lives in its own module under :mod:`agent.commands` and exposes
``register(subparsers)``; this module only discovers them. Heavy imports
(onnxruntime, numpy, paho) happen inside the command handlers, so ``--help`` and
``check-config`` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

from agent import __version__, commands
from agent.commands import CommandError
from agent.settings import ConfigError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tts-agent",
        description="Edge text-to-speech agent: Piper voices on onnxruntime, MQTT, ALSA.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--config", type=Path, default=None,
        help="TOML settings file (default /etc/tts-agent/agent.toml when it exists)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tts-agent`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except (CommandError, ConfigError) as exc:
        for line in str(exc).splitlines() or [""]:  # a ConfigError: one line per problem
            print(f"tts-agent {args.command}: error: {line}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else exc.status
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
