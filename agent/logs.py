"""Logging, configured once for the whole process.

Logs go to stderr, so stdout stays clean for command output (``phonemize --json | jq``): JSON
lines when it is not a terminal (journald, containers), a readable console renderer on a TTY.
Log with event names and key/value pairs::

    log = get_logger(__name__)
    log.info("voice_loaded", voice=name, seconds=elapsed)

Bind a request id for everything logged while handling it with
:func:`bind_request`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

__all__ = ["bind_request", "configure_logging", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL}
_NOISY = ("paho", "watchdog", "onnxruntime")


class _StderrLogger:
    """Writes each rendered line to whatever ``sys.stderr`` is *now* (not when logging was
    configured), so replacing the stream (test capture, daemonisation) never breaks logging."""

    def __init__(self, *_args: Any) -> None:
        pass

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Configure structlog and the stdlib root logger; safe to call again (last call wins)."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    numeric = _LEVELS.get(level, logging.INFO)
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
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
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


def get_logger(name: str) -> Any:
    """A structlog logger tagged with the module name; lazy, so it follows later configuration."""
    return structlog.get_logger(module=name)


@contextmanager
def bind_request(request_id: str, **extra: Any) -> Iterator[None]:
    """Bind ``request_id`` (and ``extra``) to every log line in this context."""
    tokens = structlog.contextvars.bind_contextvars(request_id=request_id, **extra)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
