"""What an installed bundle looks like on disk, to tell a changed voice from an unchanged one.

The library compares a bundle's :class:`Fingerprint` (file names, mtimes and sizes: cheap) with
the one it saw last; only a changed fingerprint costs a look at the manifest's sha256
(:func:`same_files`) or a validation. :func:`sizes_pending` tells a copy still in progress from a
broken bundle.

None of them follows a symbolic link or opens anything but a regular file, and a hash never
reads past the manifest's size: a FIFO or a link to ``/dev/zero`` in a bundle cannot stall the
watcher (the validation refuses such a bundle with its reason).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agent.voice.bundle import MAX_BUNDLE_ENTRIES, Bundle, BundleError, read_manifest
from agent.voice.files import hash_exact

__all__ = ["Fingerprint", "fingerprint", "manifest_version", "same_files", "sizes_pending"]


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a bundle looked like on disk: target dir and (name, mtime_ns, size) of each entry
    that is not a directory (links and other non-regular entries too: adding one is a
    change)."""

    bundle_dir: Path
    files: tuple[tuple[str, int, int], ...]

    @property
    def newest_mtime_ns(self) -> int:
        return max((m for _, m, _ in self.files), default=0)


def fingerprint(bundle_dir: Path) -> Fingerprint:
    """The fingerprint of ``bundle_dir`` now (hidden files left out)."""
    files = []
    try:
        with os.scandir(bundle_dir) as scan:
            entries = sorted((e for _, e in zip(range(MAX_BUNDLE_ENTRIES + 1), scan, strict=False)),
                             key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if entry.name.startswith(".") or stat.S_ISDIR(st.st_mode):
            continue
        files.append((entry.name, st.st_mtime_ns, st.st_size))
    if bundle_dir.name == "current" and bundle_dir.is_symlink():
        # a staged link resolve_bundle_dir would not follow: kept as it is, so that the
        # validation sees the link and refuses it with the reason
        return Fingerprint(bundle_dir, tuple(files))
    return Fingerprint(bundle_dir.resolve(), tuple(files))


def same_files(bundle_dir: Path, loaded: Bundle) -> bool:
    """True when the files in ``bundle_dir`` are byte for byte those ``loaded`` was read from (a
    ``touch`` or a re-copy of the same files): the manifest and the files' sha256 equal its."""
    if bundle_dir.resolve() != loaded.dir.resolve():
        return False
    try:
        files = read_manifest(bundle_dir)["files"]
        return all(
            name in files and files[name].get("sha256") == digest
            and files[name].get("size") == loaded.sizes.get(name)
            and hash_exact(bundle_dir / name, loaded.sizes[name]) == digest
            for name, digest in loaded.sha256.items()
        )
    except (BundleError, OSError, AttributeError, KeyError):
        return False


def sizes_pending(bundle_dir: Path) -> bool:
    """True while a file's size differs from the manifest (a copy still in progress)."""
    try:
        files = read_manifest(bundle_dir)["files"]
    except BundleError:
        return False
    return any(_pending(bundle_dir / name, entry) for name, entry in files.items())


def _pending(path: Path, entry: object) -> bool:
    """True when ``path`` looks like a copy of ``entry`` still in progress; a link, a FIFO or
    a bad entry is no copy in progress (validation refuses it at once)."""
    size = entry.get("size") if isinstance(entry, dict) else None
    try:
        st = path.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and isinstance(size, int) and st.st_size != size


def manifest_version(bundle_dir: Path) -> str | None:
    """The version the manifest names, or None when there is no readable manifest."""
    try:
        return str(read_manifest(bundle_dir)["version"])
    except BundleError:
        return None
