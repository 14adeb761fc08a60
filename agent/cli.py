"""The ``tts-agent`` command line: parse arguments, load settings, hand over.

Each sub-command lives in its own module under :mod:`agent.commands` and exposes
``register(subparsers)``; this module only discovers them, and imports only the module of the
command asked for (``bench/import_weight.py`` lists what each command imports). Heavy imports
(onnxruntime, numpy, paho) happen inside the command handlers, so ``--help`` and
``check-config`` stay fast.

Whatever goes wrong, standard error gets one line per problem, ``tts-agent COMMAND: error:
...``, never a traceback, and the exit status is one of the table in
:mod:`agent.commands` (docs/cli.md): a usage error (argparse's too) is one line and 2.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import pkgutil
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from agent import __version__, commands
from agent.commands import (
    FAILED,
    INTERRUPTED,
    USAGE,
    CommandError,
    add_verbose_argument,
)
from agent.settings import ConfigError

__all__ = ["Parser", "build_parser", "did_you_mean", "main"]


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``PROG: error: MESSAGE (see PROG --help)``,
    exit 2) instead of the usage text and the message. Sub-command parsers are of this
    class too (``add_subparsers`` makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        choice = _INVALID_CHOICE.search(message)
        if choice is not None:  # argparse's "invalid choice: 'sya' (choose from 'say', ...)"
            message += did_you_mean([choice.group(1)], _QUOTED.findall(choice.group(2)))
        usage_error(self.prog, message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        """Also note in ``cli_prog`` the deepest (sub-)command parsed, the one whose usage an
        unrecognized argument is an error of."""
        parsed, extra = super().parse_known_args(args, namespace)
        if not hasattr(parsed, "cli_prog"):  # a sub-command's parser has set it already
            parsed.cli_prog = self.prog
        # the options of every parser on the way, for "did you mean" (main)
        parsed.cli_options = [*getattr(parsed, "cli_options", []), *self._option_string_actions]
        return parsed, extra


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")
_QUOTED = re.compile(r"'([^']*)'")


def did_you_mean(words: Sequence[str], known: Sequence[str]) -> str:
    """``; did you mean --priority?`` for the words close to one of ``known`` (an option
    ``--x=1`` by its name; a value after an option, like ``high``, is left out), else ``""``.
    argparse in Python 3.11 has no ``suggest_on_error``: every usage error of every command
    comes here (:meth:`Parser.error`, :func:`main`)."""
    hints = []
    for word in words:
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if name in known or (word.startswith("-") != any(k.startswith("-") for k in known)):
            continue
        match = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
        if match:
            hints.append((name, match[0]))
    if not hints:
        return ""
    if len(hints) == 1:
        return f"; did you mean {hints[0][1]}?"
    return "; did you mean " + ", ".join(f"{right} for {wrong}" for wrong, right in hints) + "?"


def usage_error(prog: str, message: str) -> NoReturn:
    """One line on stderr, ``PROG: error: MESSAGE (see PROG --help)``, and exit 2."""
    line = " ".join(message.split())
    print(f"{prog}: error: {line} (see {prog} --help)", file=sys.stderr)
    sys.exit(USAGE)


_MODULE_OF = {"voices": "synth", "phonemize": "synth"}
"""The commands not registered by the module of their own name (``check-config``:
``check_config``)."""
_TOP_LEVEL = frozenset(("-h", "--help", "--version"))


def _command_word(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names, None when it names none or asks for the top-level help
    or version (which list every command)."""
    words = iter(argv)
    for word in words:
        if word in _TOP_LEVEL or word == "--":
            return None
        if word == "--config":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _modules(command: str | None) -> list[str]:
    """The command modules to register: the one of ``command`` when there is one, else all."""
    names = sorted(info.name for info in pkgutil.iter_modules(commands.__path__))
    if command is not None:
        module = _MODULE_OF.get(command, command.replace("-", "_"))
        if module in names:
            return [module]
    return names


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or (``argv`` given) of the one command ``argv`` names: a
    one-shot ``synth`` never imports the modules of ``send``, ``fleet`` or ``models``."""
    parser = _parser()
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    command = None if argv is None else _command_word(argv)
    for name in _modules(command):
        importlib.import_module(f"{commands.__name__}.{name}").register(subparsers)
    if command is not None and command not in subparsers.choices:  # not where it was looked for
        return build_parser()
    return parser


def _parser() -> Parser:
    parser = Parser(
        prog="tts-agent",
        description="Edge text-to-speech agent: Piper voices on onnxruntime, MQTT, ALSA.",
        epilog="Exit status: 0 ok, 1 runtime failure, 2 usage or validation error, 3 no answer "
               "in time (or refused by a quality gate), 130 Ctrl-C; see docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--config", type=Path, default=None,
        help="TOML settings file (default /etc/tts-agent/agent.toml when it exists)",
    )
    add_verbose_argument(parser)
    return parser


def _error(command: str, message: str) -> None:
    for line in message.splitlines() or [""]:  # a ConfigError: one line per problem
        print(f"tts-agent {command}: error: {line}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tts-agent`` console script; returns the exit status."""
    from agent.logs import cli_level, configure_logging

    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words)
    args, extra = parser.parse_known_args(words)
    if extra:
        options = [word for word in extra if word.startswith("-")]
        usage_error(args.cli_prog, f"unrecognized arguments: {' '.join(extra)}"
                                   f"{did_you_mean(options, args.cli_options)}")
    verbose: int = args.verbose
    # Until a command configures logging from its settings: warnings only, on stderr.
    configure_logging(cli_level("warning", verbose))
    try:
        status: int = args.handler(args)
    except (CommandError, ConfigError) as exc:
        _error(args.command, str(exc))
        return USAGE if isinstance(exc, ConfigError) else exc.status
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception as exc:  # a bug: still one line, the traceback with -v
        if verbose:
            raise
        _error(args.command, f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())} "
                             "(a bug; run with -v for the traceback)")
        return FAILED
    return status


if __name__ == "__main__":
    sys.exit(main())
