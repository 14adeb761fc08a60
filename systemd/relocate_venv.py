"""Make a virtual environment built under a staging root run from its final place.

    python relocate_venv.py STAGED_VENV FINAL_VENV STAGING_ROOT

``install.sh --destdir DIR`` builds the environment at ``DIR/opt/tts-agent/venv``; ``venv``
and pip write that path into it: the scripts' ``#!`` lines (or pip's ``/bin/sh`` trampoline
for a long path), ``bin/activate*``, ``pyvenv.cfg``'s ``command`` and the source file names
compiled into the byte-code. This rewrites each of them to ``FINAL_VENV`` (``/opt/tts-agent/venv``),
so the tree copied from ``DIR`` to ``/`` (a package, an image) runs there. Afterwards the
staged scripts no longer run in place; ``STAGED_VENV/bin/python -m agent`` still does.

Text files (no NUL byte in them) that name the staged path are rewritten in place, keeping
their mode; links that point into the staging root are pointed at the final path; the
byte-code that names the staged path is compiled again with the staging root stripped from its
file names. Prints what it changed on standard error.
"""

from __future__ import annotations

import os
import py_compile
import re
import sys
from pathlib import Path

MAX_TEXT_BYTES = 16 << 20
"""Larger files are not scripts or configuration: left alone."""


MAX_SHEBANG = 127
"""The longest ``#!`` line the kernel runs (pip writes a ``/bin/sh`` trampoline above it)."""
_TRAMPOLINE = re.compile(rb"""\A#!/bin/sh\n'''exec' "?([^"\s]+)"? "\$0" "\$@"\n' '''\n""")


def rewrite_text(path: Path, old: bytes, new: bytes) -> bool:
    """Replace ``old`` by ``new`` in ``path`` when it is a text file naming ``old``; a pip
    trampoline whose interpreter fits a ``#!`` line now becomes one, as pip writes it."""
    if path.stat().st_size > MAX_TEXT_BYTES:
        return False
    data = path.read_bytes()
    if old not in data or b"\0" in data:
        return False
    data = data.replace(old, new)
    trampoline = _TRAMPOLINE.match(data)
    if trampoline and len(b"#!" + trampoline[1]) <= MAX_SHEBANG:
        data = b"#!" + trampoline[1] + b"\n" + data[trampoline.end():]
    path.write_bytes(data)  # in place: mode and owner stay
    return True


def relink(path: Path, root: str) -> bool:
    """Point a link whose absolute target lies under ``root`` at the same path without it."""
    target = os.readlink(path)
    if not target.startswith(root + os.sep):
        return False
    path.unlink()
    path.symlink_to(target[len(root):])
    return True


def recompile(pyc: Path, old: bytes, root: str) -> bool:
    """Compile ``pyc``'s source again when the byte-code names ``old`` (the staged path), with
    the file name it will have once the tree is copied from ``root`` to /."""
    if old not in pyc.read_bytes():
        return False
    module, _, rest = pyc.name.partition(".")
    source = pyc.parent.parent / f"{module}.py"
    if not source.is_file():
        return False
    level = rest.partition(".opt-")[2].partition(".")[0]
    py_compile.compile(str(source), cfile=str(pyc), dfile=str(source)[len(root):],
                       optimize=int(level) if level.isdigit() else -1, doraise=False, quiet=2)
    return True


def relocate(staged: Path, final: str, root: str) -> tuple[int, int, int]:
    """Rewrite the text files, links and byte-code of ``staged``; how many of each changed."""
    old, new = str(staged).encode(), final.encode()
    texts = links = compiled = 0
    for directory, dirs, files in os.walk(staged):
        in_cache = Path(directory).name == "__pycache__"
        for name in [*files, *(d for d in dirs if (Path(directory) / d).is_symlink())]:
            path = Path(directory) / name
            if path.is_symlink():
                links += relink(path, root)
            elif in_cache and name.endswith(".pyc"):
                compiled += recompile(path, str(staged).encode(), root)
            elif path.is_file():
                texts += rewrite_text(path, old, new)
    return texts, links, compiled


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    staged, final, root = Path(argv[1]), argv[2].rstrip("/"), argv[3].rstrip("/")
    if not staged.is_dir() or not str(staged).startswith(root + os.sep) or not root:
        print(f"relocate_venv: {staged} is not a directory under {root}", file=sys.stderr)
        return 2
    texts, links, compiled = relocate(staged, final, root)
    print(f"    {staged} -> {final}: {texts} files, {links} links and {compiled} byte-code "
          "files rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
