"""Atomic file writes: readers see the old file or the new one, never a partial one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, prefix: str = ".tmp-") -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, and rename it over ``path``.

    The temporary file starts with ``prefix`` (a dot, so watchers and globs ignore it) and is
    removed if anything fails.
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
