"""What a bundle directory may hold, checked before anything in it is read (see
:mod:`agent.voice.bundle` and docs/voices.md, "What a bundle may hold"): no symbolic link in it,
a staged ``current`` that names a version directory inside its voice directory, and manifest
entries that name regular files of their size, within the size bound."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.voice.files import UnsafeFileError, file_kind
from agent.voice.graph_scan import GraphScanError

__all__ = ["MAX_BUNDLE_ENTRIES", "SAFE_NAME", "BundleError", "check_bundle_dir", "check_entry",
           "reading", "staged_target"]

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
"""What a file or version name in a bundle may be: no path separators, no leading dot."""
MAX_BUNDLE_ENTRIES = 256
"""Entries a bundle directory may have (it needs a handful)."""


class BundleError(Exception):
    """A bundle is missing, malformed or does not match its manifest."""


def staged_target(voice_dir: Path, link: Path) -> Path | None:
    """The version directory ``link`` names, or None unless it is a link to a plain-named,
    real directory in ``voice_dir``."""
    try:
        target = os.readlink(link)
    except OSError:
        return None
    if not SAFE_NAME.match(target) or target in (".", ".."):
        return None
    try:
        mode = (voice_dir / target).lstat().st_mode
    except OSError:
        return None
    return voice_dir / target if stat.S_ISDIR(mode) else None


def check_bundle_dir(bundle_dir: Path) -> None:
    """Refuse a bundle directory that is a bad ``current`` link or holds a symbolic link."""
    if bundle_dir.name == "current" and bundle_dir.is_symlink():
        raise BundleError(f"{bundle_dir}: must be a symbolic link to a version directory inside "
                          f"{bundle_dir.parent} (points at {os.readlink(bundle_dir)!r})")
    try:
        with os.scandir(bundle_dir) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_BUNDLE_ENTRIES:
                    raise BundleError(f"{bundle_dir}: more than {MAX_BUNDLE_ENTRIES} entries")
                if entry.is_symlink():
                    raise BundleError(f"{entry.path}: a symbolic link; a bundle holds regular "
                                      "files only")
    except FileNotFoundError:
        raise BundleError(f"{bundle_dir}: no such bundle directory") from None
    except NotADirectoryError:
        raise BundleError(f"{bundle_dir}: not a directory") from None
    except OSError as exc:
        raise BundleError(f"{bundle_dir}: unreadable: {exc}") from exc


def check_entry(bundle_dir: Path, name: str, entry: Any, limit: int) -> tuple[str, int]:
    """The manifest's (sha256, size) of ``name``, once the file on disk is a regular file of
    that size and the size is within ``limit`` (checked first: nothing is read)."""
    manifest = bundle_dir / "manifest.json"
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        raise BundleError(f"{manifest}: bad entry for {name}")
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise BundleError(f"{manifest}: {name} has no size (every read stops at it)")
    path = bundle_dir / name
    if size > limit:
        raise BundleError(f"{path}: {size} bytes, above the limit of {limit} "
                          "(models.max_model_bytes)")
    with reading(path):
        st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise BundleError(f"{path}: {file_kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise BundleError(f"{path}: {st.st_size} bytes, above the limit of {limit} "
                          "(models.max_model_bytes)")
    if st.st_size != size:
        raise BundleError(f"{path}: size {st.st_size} != {size} in the manifest")
    return entry["sha256"], size


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn what reading ``path`` raises into :class:`BundleError` with a one-line reason."""
    try:
        yield
    except GraphScanError as exc:
        raise BundleError(f"{path}: {exc}") from None
    except UnsafeFileError as exc:
        raise BundleError(str(exc)) from None
    except FileNotFoundError:
        raise BundleError(f"{path}: missing (listed in the manifest)") from None
    except OSError as exc:
        raise BundleError(f"{path}: unreadable: {exc}") from exc
