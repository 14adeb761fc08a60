"""Which espeak-ng build a process loads: the first phonemizer of a process decides, so each of
these runs in a fresh interpreter (the in-process tests are tests/unit/test_espeak.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent.text.espeak import DATA_ENV, LIBRARY_ENV
from tests.support import REPO

ROOT = REPO


def _run_fresh(env_overrides: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (LIBRARY_ENV, DATA_ENV)}
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=False, timeout=120)


def test_library_env_selects_the_build(tmp_path: Path) -> None:
    missing = tmp_path / "libespeak-ng-missing.so"
    done = _run_fresh({LIBRARY_ENV: str(missing)},
                      "from agent.text.espeak import EspeakPhonemizer\n"
                      "try:\n    EspeakPhonemizer('en-us')\n"
                      "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("EspeakError")
    assert str(missing) in done.stdout


def test_data_env_reaches_espeak_initialize(tmp_path: Path) -> None:
    done = _run_fresh({DATA_ENV: str(tmp_path / "no-data-here")},
                      "from agent.text.espeak import EspeakPhonemizer\n"
                      "try:\n    EspeakPhonemizer('en-us')\n"
                      "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("EspeakError")
    assert "no-data-here" in done.stdout


def test_system_library_by_default() -> None:
    done = _run_fresh({}, "from agent.text.espeak import EspeakPhonemizer\n"
                          "p = EspeakPhonemizer('en-us')\n"
                          "print(p.library, p.version, p.terminator_api)\n")
    assert done.returncode == 0, done.stderr
    library, version, _ = done.stdout.split()
    assert "libespeak-ng" in library
    assert version.startswith("1.")
