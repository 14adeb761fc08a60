"""Reading files below one root path, bounded in size; the only file access detection uses."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["MAX_CPUS", "MAX_FILE_BYTES", "SysRoot", "format_cpu_list", "parse_cpu_list"]

MAX_FILE_BYTES = 4 << 20
"""Upper bound for any file read during detection (cpuinfo of a 256-CPU host is ~400 KiB)."""
MAX_CPUS = 4096
MAX_SYMLINKS = 40
"""Links followed while resolving one path below a sysroot (the kernel's own limit)."""
LINK_LOOP = ".sysroot-link-loop"
"""What a path with more links than that resolves to (below the root; it does not exist)."""


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``"0-3,6,8-9"`` -> ``(0, 1, 2, 3, 6, 8, 9)``; raises ValueError on malformed input."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return ()
    for part in text.split(","):
        lo_text, _, hi_text = part.strip().partition("-")
        lo = int(lo_text)
        hi = int(hi_text) if hi_text else lo
        if not 0 <= lo <= hi < MAX_CPUS:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The inverse of :func:`parse_cpu_list`: ``(0, 1, 2, 5)`` -> ``"0-2,5"``."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)


def _inside(root: Path, rel: str) -> Path:
    """``rel`` below ``root`` with symbolic links resolved as if ``root`` were ``/``.

    A captured tree holds the board's own links (``proc/device-tree`` ->
    ``/sys/firmware/devicetree/base``): an absolute target, or ``..`` past the top, stays inside
    ``root`` instead of reaching the files of the machine reading the tree. Past
    :data:`MAX_SYMLINKS` links (a loop) the path is ``root/`` :data:`LINK_LOOP`, which is missing.
    """
    done: list[str] = []
    todo = [part for part in rel.split("/") if part not in ("", ".")]
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            done = done[:-1]
            continue
        candidate = root.joinpath(*done, part)
        if candidate.is_symlink():
            hops += 1
            if hops > MAX_SYMLINKS:
                return root / LINK_LOOP
            target = str(candidate.readlink())
            if target.startswith("/"):
                done = []
            todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
            continue
        done.append(part)
    return root.joinpath(*done)


class SysRoot:
    """Reads files below the sysroot, bounded in size; a missing file is ``None``.

    Below any root but ``/``, links resolve inside the root (:func:`_inside`).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.notes: list[str] = []
        self._real = root.resolve() == Path("/")

    def path(self, rel: str) -> Path:
        if self._real:
            return self.root / rel.lstrip("/")
        return _inside(self.root, rel)

    def text(self, rel: str, *, note_missing: bool = False) -> str | None:
        path = self.path(rel)
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            if path.name == LINK_LOOP:
                self.notes.append(f"{rel}: too many symbolic links")
            elif note_missing:
                self.notes.append(f"{rel} not found")
            return None
        except OSError as exc:
            self.notes.append(f"{rel} unreadable: {exc.strerror or exc}")
            return None
        if len(data) > MAX_FILE_BYTES:
            self.notes.append(f"{rel} larger than {MAX_FILE_BYTES} bytes, ignored")
            return None
        return data.decode("utf-8", errors="replace")

    def cpu_list(self, rel: str) -> tuple[int, ...] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return parse_cpu_list(text)
        except ValueError:
            self.notes.append(f"{rel}: not a CPU list: {text.strip()[:80]!r}")
            return None

    def integer(self, rel: str) -> int | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return int(text.strip())
        except ValueError:
            self.notes.append(f"{rel}: not an integer: {text.strip()[:80]!r}")
            return None
