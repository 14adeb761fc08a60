"""Logging, configured once for the whole process.

Logs go to stderr (stdout stays clean for command output): JSON lines when it is not a terminal, a
console renderer on a TTY. Log with event names and key/value pairs,
``get_logger(__name__).info("voice_loaded", voice=name)``; bind a request id with
:func:`bind_request`. Levels, colour and the PCM helper's logging: docs/internals.md#logging.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

__all__ = ["bind_request", "cli_level", "configure_logging", "get_logger", "helper_arguments",
           "use_colors"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL}
_NOISY = ("paho", "watchdog", "onnxruntime")
_configured: list[str] = ["info", "auto"]
"""The level and resolved format (``json`` or ``console``) of the last configuration."""


class _StderrLogger:
    """Writes each rendered line to whatever ``sys.stderr`` is *now* (not when logging was
    configured), so replacing the stream (test capture, daemonisation) never breaks logging; a
    line that cannot be written is dropped rather than raised into the code that logged it."""

    def __init__(self, *_args: Any) -> None:
        pass

    def msg(self, message: str) -> None:
        stream = sys.stderr
        try:
            stream.write(message + "\n")
            stream.flush()
        except (OSError, ValueError):  # closed or broken stderr (journald restarting,
            pass  # a test's capture swapped out): a log line must never fail the caller's work

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def cli_level(configured: str, verbose: int, *, quiet: str = "warning") -> str:
    """The level a command logs at: ``quiet`` (or the configured level when that is quieter)
    without ``-v``; with ``-v`` at least info, with ``-vv`` debug."""
    if verbose >= 2:
        return "debug"
    chosen = quiet if _LEVELS.get(quiet, 0) > _LEVELS.get(configured, 0) else configured
    if verbose == 1 and _LEVELS.get(chosen, 0) > logging.INFO:
        return "info"
    return chosen


def use_colors() -> bool:
    """Colour codes only on a terminal, and never with ``NO_COLOR`` set (to anything)."""
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


def helper_arguments() -> list[str]:
    """``LEVEL FORMAT`` for a helper process to pass to :func:`configure_logging`, so that it
    logs as this process does."""
    return list(_configured)


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Configure structlog and the stdlib root logger; safe to call again (last call wins)."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    numeric = _LEVELS.get(level, logging.INFO)
    _configured[:] = [level if level in _LEVELS else "info", "json" if use_json else "console"]
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Any
    if use_json:
        processors.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=use_colors())
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_StderrLogger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=numeric, stream=sys.stderr, force=True,
                        format="%(levelname)s %(name)s: %(message)s")
    for name in _NOISY:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))


_STDERR = _StderrLogger()


def get_logger(name: str) -> Any:
    """A structlog logger tagged with the module name; lazy, so it follows later configuration
    (processors, level), and always written by :class:`_StderrLogger`, configured or not:
    structlog's default logger calls ``print``, which on CPython 3.11 crashes the process
    when another thread replaces ``sys.stdout`` meanwhile (docs/internals.md#logging)."""
    return structlog.wrap_logger(_STDERR, module=name)


@contextmanager
def bind_request(request_id: str, **extra: Any) -> Iterator[None]:
    """Bind ``request_id`` (and ``extra``) to every log line in this context."""
    tokens = structlog.contextvars.bind_contextvars(request_id=request_id, **extra)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
