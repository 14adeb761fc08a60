"""The staged layout on disk: ``models/<voice>/<version>/`` with ``current`` and ``previous``
symlinks.

:meth:`agent.library.voices.VoiceLibrary.activate` points ``current`` at another version by
renaming a new symlink over it (atomic: a reader sees the old or the new target, never none) and
keeps the old target in ``previous``, which :meth:`~agent.library.voices.VoiceLibrary.rollback`
goes back to.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from agent.voice.bundle import MANIFEST_NAME

__all__ = ["CURRENT", "NAME", "PREVIOUS", "link_target", "no_previous_reason", "replace_symlink",
           "staged_versions"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
"""What a voice or version name may be (no path separators, no leading dot)."""
CURRENT, PREVIOUS = "current", "previous"


def staged_versions(voice_dir: Path) -> list[str]:
    """Versions staged in ``voice_dir`` (sub-directories with a manifest), sorted by name."""
    return sorted(
        entry.name for entry in voice_dir.iterdir()
        if entry.is_dir() and not entry.is_symlink() and not entry.name.startswith(".")
        and (entry / MANIFEST_NAME).is_file()
    )


def link_target(link: Path) -> str | None:
    """Where the symlink ``link`` points (relative, as written), None when it is no symlink."""
    return os.readlink(link) if link.is_symlink() else None


def no_previous_reason(voice_dir: Path) -> str:
    """Why the voice in ``voice_dir`` cannot be rolled back (it has no ``previous`` link)."""
    name = voice_dir.name
    if link_target(voice_dir / CURRENT) is None:
        return (f"voice {name!r} has no previous version to roll back to "
                "(rollback needs the staged layout models/<voice>/<version>/)")
    return (f"voice {name!r} has no previous version to roll back to (a rollback clears it; "
            f"`models activate {name} VERSION` goes to any of: "
            f"{', '.join(staged_versions(voice_dir))})")


def replace_symlink(link: Path, target: str) -> None:
    """Atomically make ``link`` point at ``target`` (relative), replacing what was there."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)
