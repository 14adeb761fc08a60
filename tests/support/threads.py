"""Test helper: deliver a signal to one chosen thread of another process (``tgkill``).

``os.kill`` sends a process-directed signal, which the kernel hands to any thread that does
not block it; Python's ``signal.pthread_kill`` only reaches threads of the calling process.
``tgkill(tgid, tid, sig)`` targets one thread of another process, as the kernel itself may
when it picks a worker thread.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
from pathlib import Path

__all__ = ["tgkill", "worker_threads"]

_SYS_TGKILL = {"x86_64": 234, "aarch64": 131, "armv7l": 268, "armv6l": 268}


def worker_threads(pid: int, signum: int) -> list[int]:
    """The thread ids of ``pid`` other than its main thread that do not block ``signum``
    (a thread that blocks it would keep the signal pending for itself)."""
    tids = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda p: int(p.name)):
        tid = int(task.name)
        if tid == pid:
            continue
        try:
            status = (task / "status").read_text(encoding="ascii")
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        blocked = next(int(line.split()[1], 16) for line in status.splitlines()
                       if line.startswith("SigBlk:"))
        if not blocked & (1 << (signum - 1)):
            tids.append(tid)
    return tids


def tgkill(pid: int, tid: int, signum: int) -> None:
    """Send ``signum`` to thread ``tid`` of process ``pid``."""
    libc = ctypes.CDLL(None, use_errno=True)
    func = getattr(libc, "tgkill", None)  # glibc >= 2.30
    if func is not None:
        result = func(ctypes.c_int(pid), ctypes.c_int(tid), ctypes.c_int(signum))
    else:
        number = _SYS_TGKILL[platform.machine()]
        result = libc.syscall(ctypes.c_long(number), ctypes.c_int(pid), ctypes.c_int(tid),
                              ctypes.c_int(signum))
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"tgkill({pid}, {tid}, {signal.Signals(signum).name}): "
                           f"{os.strerror(err)}")
