"""Files the agent writes and reads back: atomic writes (readers see the old file or the new one,
never a partial one), and :func:`open_regular`, which opens a file that anyone able to write its
directory could have replaced without following a link or waiting on a FIFO."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

__all__ = ["UnsafeFileError", "atomic_write", "file_kind", "open_regular"]


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


class UnsafeFileError(OSError):
    """A file that must be a regular one is not (a link, a FIFO, a device), or is not the size it
    should be."""


def file_kind(mode: int) -> str:
    """What ``mode`` (``st_mode``) is, in words, for refusals."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, when it is a regular file and not a symbolic link.

    Raises :class:`FileNotFoundError` when it does not exist and :class:`UnsafeFileError` (with
    what it is instead) otherwise; a FIFO is never waited on.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(f"{path}: a symbolic link (only a regular file is read "
                                  "here)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFileError(f"{path}: {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=1 << 16)
    except BaseException:
        os.close(fd)
        raise
