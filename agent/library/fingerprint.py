"""What an installed bundle looks like on disk, to tell a changed voice from an unchanged one.

The library compares a bundle's :class:`Fingerprint` (file names, mtimes and sizes: cheap) with
the one it saw last; only a changed fingerprint costs a look at the manifest's sha256
(:func:`same_files`) or a validation. :func:`sizes_pending` tells a copy still in progress from a
broken bundle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.voice.bundle import Bundle, BundleError, read_manifest, sha256_file

__all__ = ["Fingerprint", "fingerprint", "manifest_version", "same_files", "sizes_pending"]


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a bundle looked like on disk: target dir and (name, mtime_ns, size) of each file."""

    bundle_dir: Path
    files: tuple[tuple[str, int, int], ...]

    @property
    def newest_mtime_ns(self) -> int:
        return max((m for _, m, _ in self.files), default=0)


def fingerprint(bundle_dir: Path) -> Fingerprint:
    """The fingerprint of ``bundle_dir`` now (hidden files left out)."""
    files = []
    for path in sorted(bundle_dir.iterdir()) if bundle_dir.is_dir() else []:
        if path.name.startswith(".") or not path.is_file():
            continue
        st = path.stat()
        files.append((path.name, st.st_mtime_ns, st.st_size))
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
            and sha256_file(bundle_dir / name) == digest
            for name, digest in loaded.sha256.items()
        )
    except (BundleError, OSError):
        return False


def sizes_pending(bundle_dir: Path) -> bool:
    """True while a file's size differs from the manifest (a copy still in progress)."""
    try:
        files = read_manifest(bundle_dir)["files"]
    except BundleError:
        return False
    for file_name, entry in files.items():
        try:
            if (bundle_dir / file_name).stat().st_size != entry.get("size"):
                return True
        except FileNotFoundError:
            return True
    return False


def manifest_version(bundle_dir: Path) -> str | None:
    """The version the manifest names, or None when there is no readable manifest."""
    try:
        return str(read_manifest(bundle_dir)["version"])
    except BundleError:
        return None
