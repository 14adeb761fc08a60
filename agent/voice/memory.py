"""Give freed heap memory back to the system after a model is swapped out.

An onnxruntime session of a voice leaves freed-but-retained pages in glibc's malloc arenas when
it is destroyed, several times the model's size; without trimming, resident memory climbs by
about that much on every reload until it plateaus (``bench/model_reload.py`` measures it).
``malloc_trim(0)`` returns them. On a C library without it (musl) this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import cache

__all__ = ["rss_bytes", "trim_heap"]


@cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        func = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_size_t]
    func.restype = ctypes.c_int
    return func


def trim_heap() -> bool:
    """Collect garbage, then release free heap pages to the OS; True when memory was returned."""
    gc.collect()
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def rss_bytes() -> int:
    """Resident set size of this process (bytes), from /proc; 0 where unavailable."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")
