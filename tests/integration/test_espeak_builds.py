"""Which espeak-ng build a process loads: the first phonemizer of a process decides, so each of
these runs in a fresh interpreter (the in-process tests are tests/unit/test_espeak.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent.text.espeak import DATA_ENV, LIBRARY_ENV
from agent.text.espeak_build import LIBRARY_FILE, training_dir
from tests.support import REPO

ROOT = REPO
FIXTURE = REPO / "tests" / "fixtures" / "training_phonemes.json"
VOICE_DIR = REPO / "models" / "en_US-joe-medium"


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


def test_the_training_build_by_default() -> None:
    # ./build.sh (and systemd/install.sh) unpack it into the venv: agent.text.espeak_fetch
    done = _run_fresh({}, "from agent.text.espeak import EspeakPhonemizer, describe\n"
                          "p = EspeakPhonemizer('en-us')\n"
                          "print(p.build, p.version, p.terminator_api)\nprint(describe())\n")
    assert done.returncode == 0, done.stderr
    first, described = done.stdout.splitlines()
    assert first == "training 1.52-dev True", (
        f"{first}: the training espeak-ng is not in {training_dir()} (run ./build.sh)")
    assert "piper-phonemize==1.1.0" in described and LIBRARY_FILE in described


def test_system_selects_the_distribution_build() -> None:
    done = _run_fresh({LIBRARY_ENV: "system"},
                      "from agent.text.espeak import EspeakPhonemizer\n"
                      "p = EspeakPhonemizer('en-us')\nprint(p.build, p.library, p.version)\n")
    assert done.returncode == 0, done.stderr
    build, library, version = done.stdout.split()
    assert build == "system" and "libespeak-ng" in library and LIBRARY_FILE not in library
    assert version.startswith("1.")


_FRONTEND = """
import json, sys
from pathlib import Path
from agent.text.frontend import Frontend
config = json.loads(next(Path(sys.argv[1]).glob('*.onnx.json')).read_text())
frontend = Frontend(config['espeak']['voice'], config['phoneme_id_map'], max_chars=10_000)
lines = json.loads(Path(sys.argv[2]).read_text())['lines']
print(json.dumps([[frontend.ids(s) for s in frontend.sentences(line['text'])] for line in lines]))
"""


def test_the_default_frontend_says_what_the_voice_was_trained_on() -> None:
    # ids of piper-phonemize 1.1.0 for a sample of the parity corpus (bench/training_phonemes.py)
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))["lines"]
    env = {k: v for k, v in os.environ.items() if k not in (LIBRARY_ENV, DATA_ENV)}
    done = subprocess.run([sys.executable, "-c", _FRONTEND, str(VOICE_DIR), str(FIXTURE)],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    ours = json.loads(done.stdout)
    differ = [line["text"] for line, ids in zip(expected, ours, strict=True)
              if ids != line["ids"]]
    assert len(expected) > 50 and differ == []
