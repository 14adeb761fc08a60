"""The kernel's view of the system clock's discipline, read with ``adjtimex(2)`` (modes 0: read
only, nothing is ever set), for the health report's ``sync.clock`` (docs/fleet.md).

chrony, ntpd and systemd-timesyncd keep the kernel's NTP state: whether the clock is
synchronized, and its estimated and maximum error. A synchronized group speak starts by the
wall clock, so this says how far this device's start can be trusted. The call goes through
ctypes to the C library's ``adjtimex``; where it is missing or refused (not Linux, a seccomp
filter) the reading is an error, never an exception. :class:`PingClock`: what the last ping's
``sent_ms`` says of this clock against the controller's (``sync.controller``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import math
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.health.report import ClockReport, ControllerClock

__all__ = ["STA_UNSYNC", "TIME_ERROR", "PingClock", "Timex", "read_clock"]

TIME_ERROR = 5
"""The clock state ``adjtimex`` returns while the clock is not synchronized."""
STA_UNSYNC = 0x0040
"""The status bit the kernel (and the NTP daemon) keep set while the clock is unsynchronized."""


class _Timeval(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long))


class Timex(ctypes.Structure):
    """``struct timex`` of the C library (linux/timex.h): ``long`` fields, so one layout fits
    x86_64 and aarch64 (208 bytes) and 32-bit ARM's ``adjtimex`` symbol alike."""

    _fields_ = (("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long),
                ("status", ctypes.c_int), ("constant", ctypes.c_long),
                ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                ("time", _Timeval), ("tick", ctypes.c_long), ("ppsfreq", ctypes.c_long),
                ("jitter", ctypes.c_long), ("shift", ctypes.c_int), ("stabil", ctypes.c_long),
                ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long), ("errcnt", ctypes.c_long),
                ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
                ("_reserved", ctypes.c_int * 11))


Adjtimex = Callable[[Timex], tuple[int, int]]
"""Calls ``adjtimex`` on the buffer: (its return value, errno)."""


@functools.cache
def _libc_function() -> Any:
    """The C library's ``adjtimex``, looked up once (raises OSError/AttributeError where there
    is none; a failed lookup is not cached and is tried again at the next report)."""
    function = ctypes.CDLL(None, use_errno=True).adjtimex
    function.argtypes = (ctypes.POINTER(Timex),)
    function.restype = ctypes.c_int
    return function


def _libc_adjtimex(buf: Timex) -> tuple[int, int]:
    """The C library's ``adjtimex`` on ``buf``: (its return value, errno)."""
    function = _libc_function()
    ctypes.set_errno(0)
    result = int(function(ctypes.byref(buf)))
    return result, ctypes.get_errno()


def _error(text: str) -> ClockReport:
    return {"synchronized": None, "est_error_ms": None, "max_error_ms": None,
            "error": text[:200]}


def read_clock(call: Adjtimex = _libc_adjtimex) -> ClockReport:
    """The clock's discipline now: synchronized (the state is not ``TIME_ERROR`` and
    ``STA_UNSYNC`` is clear), the estimated and maximum error (ms); or why it cannot be read."""
    buf = Timex()  # zeroed: modes 0 reads and sets nothing
    try:
        result, code = call(buf)
    except (OSError, AttributeError) as exc:
        return _error(f"adjtimex unavailable: {exc}")
    if result < 0:
        name = errno.errorcode.get(code, str(code))
        return _error(f"adjtimex failed: {os.strerror(code)} ({name})")
    synchronized = result != TIME_ERROR and not buf.status & STA_UNSYNC
    return {"synchronized": synchronized, "est_error_ms": round(buf.esterror / 1000, 3),
            "max_error_ms": round(buf.maxerror / 1000, 3), "error": None}


class PingClock:
    """The last ping's ``sent_ms`` against this device's clock on its arrival (dispatch thread
    records, the health snapshot's thread reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[float, float] | None = None  # (at most, ms; monotonic stamp)

    def record(self, sent_ms: float, received_s: float) -> None:
        """A ping sent at ``sent_ms`` (the controller's Unix ms, validated by the protocol)
        that arrived at ``received_s`` (this device's Unix time, s)."""
        if not math.isfinite(sent_ms) or not math.isfinite(received_s):
            return
        with self._lock:
            self._last = (round(received_s * 1000 - sent_ms, 2), time.monotonic())

    def report(self) -> ControllerClock | None:
        """``offset_at_most_ms``: this device's clock less the controller's is at most this
        (the trip's time is in it, so it is an upper bound, never a measurement); ``age_s``:
        since that ping came. None before the first ping that carried ``sent_ms``."""
        with self._lock:
            last = self._last
        if last is None:
            return None
        return {"offset_at_most_ms": last[0], "age_s": round(time.monotonic() - last[1], 1)}
