"""build.sh's int8 step by architecture: x86_64 quantizes, a board (aarch64) does not.

Quantizing takes about a minute on x86_64 and many minutes on a board (docs/voices.md, "int8 on
a slow board"): set-up on aarch64 leaves fp32 serving and says how to import a bundle quantized
elsewhere. The functions run as build.sh writes them, ``tts-agent`` replaced by a recorder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

BUILD_SH = REPO / "build.sh"


def function_source(name: str) -> str:
    text = BUILD_SH.read_text(encoding="utf-8")
    match = re.search(rf"(?ms)^{name}\(\) \{{.*?^\}}\n", text)
    assert match, f"build.sh has no {name} function"
    return match.group(0)


def _run(tmp_path: Path, arch: str, call: str, **env: str) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "checkout"
    (root / "models" / "en_US-joe-medium").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    agent = root / ".venv" / "bin" / "tts-agent"
    agent.write_text(f'#!/bin/sh\necho "$*" >> "{tmp_path}/calls"\n', encoding="utf-8")
    python = root / ".venv" / "bin" / "python"  # int8_fresh reads the manifest with the agent
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" "$@"\n',
                      encoding="utf-8")
    for stub in (agent, python):
        stub.chmod(0o755)
    manifest = env.pop("MANIFEST", None)
    if manifest:
        shutil.copy(manifest, root / "models" / "en_US-joe-medium" / "manifest.json")
    script = (f'set -euo pipefail\nROOT="{root}"\nVENV="$ROOT/.venv"\nARCH="{arch}"\n'
              'VOICE_NAME="en_US-joe-medium"\n'
              + "".join(function_source(n) for n in ("say", "int8_fresh", "int8_plan", "int8"))
              + call + "\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("BUILD_INT8", "NO_COLOR")}
    return subprocess.run(["/bin/bash", "-c", script], env={**clean, **env}, capture_output=True,
                          text=True, timeout=60, check=False, cwd=root)


def _calls(tmp_path: Path) -> list[str]:
    calls = tmp_path / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize(("arch", "override", "plan"), [
    ("x86_64", None, "quantize"), ("aarch64", None, "skip"), ("armv7l", None, "skip"),
    ("aarch64", "quantize", "quantize"), ("x86_64", "skip", "skip"), ("aarch64", "auto", "skip"),
])
def test_the_plan_by_architecture(tmp_path: Path, arch: str, override: str | None,
                                  plan: str) -> None:
    env = {"BUILD_INT8": override} if override else {}
    done = _run(tmp_path, arch, f'int8_plan "{arch}"', **env)
    assert (done.returncode, done.stdout.strip()) == (0, plan), done.stderr


def test_a_bad_override_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "aarch64", "int8_plan aarch64", BUILD_INT8="later")
    assert done.returncode == 2
    assert "BUILD_INT8 must be quantize, skip or auto, not later" in done.stderr


def test_set_up_on_aarch64_does_not_quantize(tmp_path: Path) -> None:
    done = _run(tmp_path, "aarch64", "int8")
    assert done.returncode == 0, done.stderr
    assert not any(call.startswith("quantize") for call in _calls(tmp_path))
    assert "not quantizing on aarch64" in done.stderr
    assert "docs/voices.md#int8-on-a-slow-board" in done.stderr


def test_set_up_on_x86_64_quantizes(tmp_path: Path) -> None:
    done = _run(tmp_path, "x86_64", "int8")
    assert done.returncode == 0, done.stderr
    root = tmp_path / "checkout" / "models" / "en_US-joe-medium"
    assert _calls(tmp_path) == [f"quantize {root}/en_US-joe-medium.onnx {root}"]


def test_build_sh_int8_quantizes_on_a_board_when_asked(tmp_path: Path) -> None:
    """``./build.sh int8`` is an explicit request: it quantizes on aarch64 too."""
    line = next(ln for ln in BUILD_SH.read_text().splitlines() if ln.strip().startswith("int8)"))
    call = line.split(";", 2)[2].rsplit(";;", 1)[0].strip()  # what the int8 command runs last
    done = _run(tmp_path, "aarch64", call)
    assert done.returncode == 0, done.stderr
    assert [c.split()[0] for c in _calls(tmp_path)] == ["quantize"]


def test_a_board_keeps_an_int8_bundle_made_elsewhere(tmp_path: Path,
                                                   real_voice_dir: Path) -> None:
    """The x86_64 checkout's bundle copied to an aarch64 board: set-up leaves it as it is."""
    manifest = real_voice_dir / "manifest.json"
    assert '"int8":' in manifest.read_text(encoding="utf-8")
    done = _run(tmp_path, "aarch64", "int8", MANIFEST=str(manifest))
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == ["models verify"]  # checked, not quantized
    assert done.stderr == ""


def test_the_docs_anchor_exists() -> None:
    voices = (REPO / "docs" / "voices.md").read_text(encoding="utf-8")
    assert "\n## int8 on a slow board\n" in voices
