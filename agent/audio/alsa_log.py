"""alsa-lib's own messages go to our log instead of straight to stderr.

:func:`route_alsa_messages` installs an error handler (``snd_lib_error_set_handler``) that logs
each message as ``alsa_lib`` at info level; it is installed once, in the PCM helper process, and
leaves the C ``errno`` as it found it. How the variadic handler is called and why ``errno``
matters: docs/internals.md#alsa-libs-messages.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from agent.logs import get_logger

__all__ = ["route_alsa_messages"]

log = get_logger(__name__)

_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                            ctypes.c_char_p)
_MAX_TEXT = 512
"""Longest part of a message logged (alsa-lib's are short; a bound all the same)."""
_installed: list[Any] = []
"""The callback alsa-lib calls; kept here so that it is never collected."""
_errno: list[Any] = []
"""libc's ``__errno_location`` (the calling thread's ``errno``), once installed."""


def _text(value: bytes | None) -> str:
    return (value or b"")[:_MAX_TEXT].decode("utf-8", "replace").strip()


def _on_message(file: bytes | None, line: int, function: bytes | None, err: int,
                fmt: bytes | None) -> None:
    saved = _errno[0]().contents.value if _errno else None
    try:
        fields: dict[str, Any] = {"function": _text(function), "source": f"{_text(file)}:{line}"}
        if err:
            fields["error"] = os.strerror(abs(err))
        log.info("alsa_lib", message=_text(fmt), **fields)
    except Exception:  # noqa: S110 - an exception must not cross back into alsa-lib
        pass
    finally:
        if saved is not None:
            _errno[0]().contents.value = saved  # alsa-lib may return -errno next


def route_alsa_messages() -> bool:
    """Install the handler (once per process); False when alsa-lib cannot be loaded."""
    if _installed:
        return True
    try:
        lib = ctypes.CDLL("libasound.so.2")
        set_handler = lib.snd_lib_error_set_handler
        errno_location = ctypes.CDLL(None).__errno_location
    except (OSError, AttributeError):
        return False  # without a way to keep errno, alsa-lib keeps printing its own lines
    errno_location.restype = ctypes.POINTER(ctypes.c_int)
    errno_location.argtypes = []
    _errno.append(errno_location)
    handler = _HANDLER(_on_message)
    set_handler.argtypes = [_HANDLER]
    set_handler.restype = ctypes.c_int
    if set_handler(handler) != 0:
        return False
    _installed.append(handler)
    return True
