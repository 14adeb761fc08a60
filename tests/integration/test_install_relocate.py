"""``systemd/install.sh install --destdir DIR`` stages a tree that runs once copied to /.

The virtual environment is built under DIR, where venv and pip write its path into the
scripts, ``bin/activate``, ``pyvenv.cfg`` and the byte-code; install.sh rewrites them to the
final prefix. Here the final prefix is a temporary directory too, so the staged tree can be
moved there and run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support import REPO

BASH = shutil.which("bash") or "/bin/bash"


def interpreter(script: Path) -> str:
    """The interpreter a script names: its ``#!`` line, or the one pip's ``/bin/sh``
    trampoline (for a path too long for ``#!``) executes."""
    lines = script.read_text().splitlines()
    if lines[0] == "#!/bin/sh" and lines[1].startswith("'''exec' "):
        return lines[1].split()[1].strip('"')
    return lines[0].removeprefix("#!")


def test_a_staged_tree_names_its_final_prefix_and_runs_there(tmp_path: Path) -> None:
    stage, prefix = tmp_path / "stage", tmp_path / "final" / "tts-agent"
    result = subprocess.run(
        [BASH, str(REPO / "systemd/install.sh"), "install", str(REPO), "--destdir", str(stage),
         "--prefix", str(prefix), "--no-pip"],
        capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr
    staged = Path(f"{stage}{prefix}")
    venv = prefix / "venv"

    scripts = [p for p in (staged / "venv/bin").iterdir()
               if not p.is_symlink() and p.read_bytes().startswith(b"#!")]
    assert scripts  # pip's, from ensurepip
    for script in scripts:
        assert interpreter(script) == f"{venv}/bin/python3", script
    assert f" {venv}\n" in (staged / "venv/pyvenv.cfg").read_text()  # venv's command line
    # Nothing in the tree names the staging directory: scripts, activate, byte-code.
    named = [str(p) for p in staged.rglob("*")
             if p.is_file() and not p.is_symlink() and str(stage).encode() in p.read_bytes()]
    assert named == []

    # Copied to its final place, it runs there.
    prefix.parent.mkdir(parents=True)
    os.rename(staged, prefix)
    pip = subprocess.run([str(venv / "bin/pip"), "--version"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert pip.returncode == 0, pip.stderr
    assert f"from {venv}/lib/" in pip.stdout
    activated = subprocess.run(
        [BASH, "-c", f'. "{venv}/bin/activate" && python -c "import sys; print(sys.prefix)"'],
        capture_output=True, text=True, timeout=120, check=False)
    assert activated.stdout.strip() == str(venv), activated.stderr
