"""Sub-commands of ``tts-agent``, one module each, and what they share.

Every module here defines ``register(subparsers)``, which adds its parser and sets ``handler``
to a function ``(args) -> exit status``. A handler reports an expected failure by raising
:class:`CommandError` (one line, no traceback) with one of the exit statuses below
(:data:`OK`, :data:`FAILED`, :data:`USAGE`, :data:`NO_ANSWER`, :data:`INTERRUPTED`: the table
of docs/cli.md#exit-codes). The arguments and checks several commands share live here too;
docs/internals.md#sub-commands-and-exit-statuses.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.settings import Settings
    from agent.text.document import Document
    from agent.voice.voice import SynthesisParams

__all__ = [
    "CONFLICT",
    "EXIT_CODES",
    "FAILED",
    "INTERRUPTED",
    "MAX_STDIN_BYTES",
    "NO_ANSWER",
    "OK",
    "USAGE",
    "CommandError",
    "UsageError",
    "add_config_argument",
    "add_synthesis_arguments",
    "add_verbose_argument",
    "bounded",
    "checked_speaker",
    "checked_speech",
    "checked_text",
    "read_text",
    "settings_from_args",
    "shown",
    "synthesis_params",
]

MAX_STDIN_BYTES = 1 << 20

OK = 0
"""Exit status: success."""
FAILED = 1
"""Exit status: a runtime failure (valid command, could not be done)."""
USAGE = 2
"""Exit status: bad usage or input, invalid settings; refused before anything was done."""
NO_ANSWER = 3
"""Exit status: no answer in time (``send``), or none good enough (``quantize``'s gate)."""
CONFLICT = 4
"""Exit status: ``send --wait``: one device answered from two agent instances (the same device
id used twice)."""
INTERRUPTED = 130
"""Exit status: Ctrl-C (128 + SIGINT, as a shell reports it)."""
EXIT_CODES = {
    OK: "success",
    FAILED: "a runtime failure: the command was valid but could not be done",
    USAGE: "bad usage or input, or invalid settings: refused before anything was done",
    NO_ANSWER: "no answer in time, or none good enough; nothing was changed",
    CONFLICT: "send --wait: one device answered from two agent instances (a device id used twice)",
    INTERRUPTED: "interrupted with Ctrl-C",
}
"""Every exit status a ``tts-agent`` command returns, with its meaning (docs/cli.md)."""


_UNSAFE = [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _UNSAFE}
"""C0 and C1 controls (ESC among them), DEL, and the bidi embeddings, overrides and isolates."""


def shown(text: str) -> str:
    """``text`` safe to print on a terminal: what could move the cursor, clear the screen, set
    the title or reorder the line (C0/C1 controls, DEL, bidi overrides) written as ``\\xNN`` /
    ``\\uNNNN``. Every string from the broker goes through it before a human reads it."""
    return text.translate(_ESCAPES)


class CommandError(Exception):
    """An expected failure of a command, printed as ``tts-agent COMMAND: error: MESSAGE``
    (one line per line of the message) and ended with ``status``."""

    def __init__(self, message: str, status: int = FAILED) -> None:
        super().__init__(message)
        self.status = status


class UsageError(CommandError):
    """Bad usage or input (exit status :data:`USAGE`): refused before anything was done."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=USAGE)


def settings_from_args(args: argparse.Namespace, *, configure_logs: bool = True,
                       daemon: bool = False, quiet: str = "warning") -> Settings:
    """Load the settings named by ``--config`` and configure logging from them.

    A command logs ``quiet`` (warnings and errors) and above unless ``-v`` (info) or ``-vv``
    (debug) is given; the daemon (``daemon``) logs at its configured ``log.level``.
    """
    from agent.logs import cli_level, configure_logging
    from agent.settings import load_settings

    config: Path | None = getattr(args, "config", None)
    settings = load_settings(config)
    if configure_logs:
        verbose: int = getattr(args, "verbose", 0)
        configured = settings.log.level
        level = cli_level(configured, verbose, quiet=configured if daemon else quiet)
        configure_logging(level, settings.log.format)
    return settings


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """Accept ``--config PATH`` and ``-v``/``--verbose`` after the sub-command name too
    (``tts-agent synth --config F -v``)."""
    parser.add_argument(
        "--config", type=Path, default=argparse.SUPPRESS,
        help="TOML settings file (default /etc/tts-agent/agent.toml when it exists)",
    )
    add_verbose_argument(parser, default=argparse.SUPPRESS)


def add_verbose_argument(parser: argparse.ArgumentParser, default: object = 0) -> None:
    """``-v``: log info lines too, ``-vv``: debug lines (a command logs warnings only)."""
    parser.add_argument(
        "-v", "--verbose", action="count", default=default,
        help="log what happens (info; -vv: debug); without it only warnings and errors",
    )


def add_synthesis_arguments(parser: argparse.ArgumentParser) -> None:
    """``--voice``, ``--length-scale``, ``--noise-scale``, ``--noise-w``, ``--speaker``."""
    parser.add_argument("--voice", help="voice name (default: models.default_voice)")
    parser.add_argument("--length-scale", type=float, help="speech duration factor (>1 slower)")
    parser.add_argument("--noise-scale", type=float, help="generator noise (0 = deterministic)")
    parser.add_argument("--noise-w", type=float, help="duration noise (0 = deterministic)")
    parser.add_argument("--speaker", type=int, help="speaker id of a multi-speaker voice")


def bounded(value: float | None, name: str, low: float, high: float) -> float | None:
    """``value`` when it lies in [low, high] (or is None); a :class:`UsageError` otherwise."""
    if value is not None and not low <= value <= high:  # NaN is refused too
        raise UsageError(f"{name} must be between {low:g} and {high:g} (got {value:g})")
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


def checked_speaker(speaker: int | None, voice: str, num_speakers: int) -> None:
    """Refuse (:class:`UsageError`) a ``--speaker`` the voice does not have: a single-speaker
    voice has only speaker 0."""
    if speaker is not None and not 0 <= speaker < max(1, num_speakers):
        which = ("has a single speaker (0)" if num_speakers <= 1
                 else f"has speakers 0-{num_speakers - 1}")
        raise UsageError(f"--speaker {speaker}: voice {voice} {which}")


def read_text(text: str | None) -> str:
    """``text``, or standard input (at most MAX_STDIN_BYTES) when it is None or ``-``."""

    if text is not None and text != "-":
        return text
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise UsageError(f"standard input is larger than {MAX_STDIN_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def add_ssml_argument(parser: argparse.ArgumentParser) -> None:
    """``--ssml``: the text is SSML (it is anyway when it starts with ``<speak``)."""
    parser.add_argument("--ssml", action="store_true",
                        help="the text is SSML (default: when it starts with <speak)")


def text_document(text: str, ssml: bool, settings: Settings, command: str) -> Document | None:
    """The SSML document of ``text`` (``--ssml``, or it starts with ``<speak``), or None for
    plain text; invalid or unsupported markup (an ``<audio src>`` of no chime in
    ``chimes.dir`` too) is a :class:`UsageError` with the reason, as the daemon's ``rejected``
    (the admission's SSML stage, :func:`agent.pipeline.admit.document_of`). What the markup
    asks and is ignored is printed on stderr, a ``warning:`` line each (``command`` names the
    command), as the daemon's ``started`` event carries it in ``warnings``."""
    from agent.audio.chimes import Chimes
    from agent.pipeline.admit import Refusal, document_of

    document = document_of(text, True if ssml else None, settings.synthesis.max_text_chars,
                           Chimes(settings.chimes.dir).names())
    if isinstance(document, Refusal):
        raise UsageError(document.reason)
    for warning in () if document is None else document.warnings:
        print(f"tts-agent {command}: warning: SSML: {warning}", file=sys.stderr)
    return document


def checked_speech(text: str, document: Document | None, voice: str | None,
                   settings: Settings) -> None:
    """Refuse (:class:`UsageError`, before any model loads) text its voice cannot say: a script
    it cannot read, or nothing to speak once emoji are dropped; the admission's speech stage
    (:func:`agent.pipeline.admit.voice_refusal`), as the daemon's."""
    from agent.library.languages import SpeechCheck
    from agent.pipeline.admit import Context, voice_refusal

    context = Context(max_text_chars=settings.synthesis.max_text_chars,
                      speakable=SpeechCheck.for_settings(settings))
    refused = voice_refusal(voice or settings.models.default_voice, text, document, context)
    if refused is not None:
        raise UsageError(refused.reason)


def checked_text(text: str | None, settings: Settings) -> str:
    """:func:`read_text`, refused early (before any model loads) when it cannot be spoken: the
    admission's text bounds (:func:`agent.pipeline.admit.text_refusal`), then the text
    frontend's own check of the cleaned text (nothing left once control characters go)."""
    from agent.pipeline.admit import text_refusal
    from agent.text.frontend import TextError, normalize_text

    text = read_text(text)
    refused = text_refusal(text, settings.synthesis.max_text_chars)
    if refused is not None:
        raise UsageError(refused.reason)
    try:
        normalize_text(text, settings.synthesis.max_text_chars)
    except TextError as exc:
        raise UsageError(str(exc)) from exc
    return text
