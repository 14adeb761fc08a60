"""Reading a bundle's files without trusting them: regular files only, never more bytes than
expected.

A bundle directory is written by whoever can write the models directory, so none of its entries
is trusted before it has been checked: :func:`open_regular` (in :mod:`agent.fsutil`) opens a
name without following a symbolic link (``O_NOFOLLOW``) and without blocking on a FIFO
(``O_NONBLOCK``), and refuses anything that is not a regular file (a FIFO, a device, a socket,
a directory) before a byte is read. :func:`read_exact` and :func:`hash_exact` read exactly the
size the manifest gives, and fail when the file is shorter or has grown past it: a file that
never ends (a character device, a file still being appended to) costs at most that many bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

from agent.fsutil import UnsafeFileError, file_kind, open_regular

__all__ = ["BLOCK", "HashingReader", "UnsafeFileError", "file_kind", "hash_exact", "hash_handle",
           "open_regular", "read_exact", "read_handle"]

BLOCK = 1 << 20
"""Bytes read at a time while hashing."""


def _read_upto(handle: BinaryIO, size: int, sink: hashlib._Hash | None,
               keep: bool) -> tuple[int, bytes]:
    """Read ``size`` bytes (fewer at end of file) into ``sink``; returns the count and, with
    ``keep``, the bytes."""
    parts: list[bytes] = []
    done = 0
    while done < size:
        block = handle.read(min(BLOCK, size - done))
        if not block:
            break
        done += len(block)
        if sink is not None:
            sink.update(block)
        if keep:
            parts.append(block)
    return done, b"".join(parts)


def _exact(path: Path, handle: BinaryIO, size: int, sink: hashlib._Hash | None,
           keep: bool) -> bytes:
    got, data = _read_upto(handle, size, sink, keep)
    if got < size:
        raise UnsafeFileError(f"{path}: {got} bytes, shorter than the {size} the manifest gives")
    if handle.read(1):
        raise UnsafeFileError(f"{path}: longer than the {size} bytes the manifest gives")
    return data


def hash_handle(path: Path, handle: BinaryIO, size: int) -> str:
    """Hex sha256 of exactly ``size`` bytes of ``handle`` (opened on ``path``), which must end
    there."""
    digest = hashlib.sha256()
    _exact(path, handle, size, digest, keep=False)
    return digest.hexdigest()


def hash_exact(path: Path, size: int) -> str:
    """Hex sha256 of the regular file ``path``, which must be exactly ``size`` bytes."""
    with open_regular(path) as handle:
        return hash_handle(path, handle, size)


def read_exact(path: Path, size: int) -> tuple[bytes, str]:
    """The bytes of the regular file ``path`` (exactly ``size`` of them) and their sha256: what
    is parsed is what was hashed."""
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        data = _exact(path, handle, size, digest, keep=True)
    return data, digest.hexdigest()


class HashingReader:
    """Exactly ``size`` bytes of ``handle`` (opened on ``path``, from its current position),
    read once front to back with every byte hashed as it passes: :meth:`read`, and forward
    :meth:`seek` (a skip reads what it passes over into the hash, never into memory); then
    :meth:`finish` hashes the rest and checks the length. A parser reading through it sees the
    very bytes that were hashed, and none of them is held
    (:func:`agent.voice.bundle.verify_model`)."""

    def __init__(self, path: Path, handle: BinaryIO, size: int) -> None:
        self._path, self._handle, self._size = path, handle, size
        self._digest = hashlib.sha256()
        self._pos = 0

    def read(self, count: int = -1) -> bytes:
        left = self._size - self._pos
        data = self._handle.read(left if count < 0 else min(count, left))
        self._digest.update(data)
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self._pos + offset if whence == 1 else -1
        if target < self._pos:
            raise OSError(f"{self._path}: only forward seeks while hashing")
        self._pos += _read_upto(self._handle, min(target, self._size) - self._pos, self._digest,
                                keep=False)[0]
        return self._pos

    def tell(self) -> int:
        return self._pos

    def finish(self) -> str:
        """Hash what was not read yet; the hex sha256 of all ``size`` bytes. Raises
        :class:`UnsafeFileError` for a file shorter or longer than ``size``."""
        self._pos += _read_upto(self._handle, self._size - self._pos, self._digest,
                                keep=False)[0]
        if self._pos < self._size:
            raise UnsafeFileError(f"{self._path}: {self._pos} bytes, shorter than the "
                                  f"{self._size} the manifest gives")
        if self._handle.read(1):
            raise UnsafeFileError(f"{self._path}: longer than the {self._size} bytes the "
                                  "manifest gives")
        return self._digest.hexdigest()


def read_handle(path: Path, handle: BinaryIO, size: int) -> tuple[bytes, str]:
    """All of ``handle`` (opened on ``path``, from its start: exactly ``size`` bytes) in one
    buffer, and its sha256: a model is read once, and what is hashed is what loads."""
    handle.seek(0)
    data = handle.read(size)
    if len(data) < size:
        raise UnsafeFileError(f"{path}: {len(data)} bytes, shorter than the {size} the manifest "
                              "gives")
    if handle.read(1):
        raise UnsafeFileError(f"{path}: longer than the {size} bytes the manifest gives")
    return data, hashlib.sha256(data).hexdigest()
