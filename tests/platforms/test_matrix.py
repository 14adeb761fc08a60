"""The platform matrix: a clean checkout installed, speaking and tested on each distribution.

Opt-in, slow and root (see ``docs/platforms.md``; ``bench/platforms.py run`` runs this)::

    sudo TTS_AGENT_TEST_PLATFORMS=1 [TTS_AGENT_PLATFORMS=debian13-amd64,...] \\
        .venv/bin/python -m pytest -q tests/platforms

Each row: a cached ``mmdebstrap`` root (``tests/support/platforms.py``), copied, run under
``systemd-nspawn`` (aarch64 through qemu-user): ``git archive HEAD``, ``./build.sh`` as root,
``check-config``, ``synth`` of a real sentence (length and level checked), the phoneme parity
bench against the training phonemizer (≥ 95% identical), ``./build.sh demo``,
the unit suite, a second ``./build.sh`` that must run no apt, and on x86_64 the root booted
(``tests/support/nspawn.py``) with the service installed. Each step's outcome and time go into
``bench/results/platforms.json``; a row fails when one of its steps failed.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.text import espeak_fetch
from tests.support import REPO, nspawn
from tests.support import platforms as roots

pytestmark = [
    pytest.mark.skipif(os.environ.get("TTS_AGENT_TEST_PLATFORMS") != "1",
                       reason="set TTS_AGENT_TEST_PLATFORMS=1 to run the platform matrix"),
    pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                       reason="mmdebstrap and systemd-nspawn need root on Linux"),
    pytest.mark.timeout(6 * 3600),
]

SENTENCE = "The next train to the airport leaves from platform four at half past nine."
SPEECH_S = (2.0, 12.0)  # a plausible length for that sentence, not a timing
RMS = (0.01, 0.5)  # speech, not silence and not noise at full scale (of int16 full scale)
SRC = "/src/tts-agent"
# systemd-nspawn on this host (no systemd of its own) says this on every exit; nothing failed.
NSPAWN_NOISE = "Attempted to remove disk file system under"
SELECTED = [name for name in os.environ.get("TTS_AGENT_PLATFORMS", "").split(",") if name]


def _matrix_results() -> Any:
    spec = importlib.util.spec_from_file_location("bench_platforms", REPO / "bench/platforms.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Row:
    """One platform's run: each step's outcome, time and what it said."""

    def __init__(self, platform: roots.Platform, work: Path) -> None:
        self.platform, self.work, self.root = platform, work, work / "root"
        self.steps: dict[str, dict[str, Any]] = {}
        self.facts: dict[str, Any] = {"python": None, "onnxruntime": None, "espeak_ng": None,
                                      "espeak_ng_system": None}
        self.unavailable: dict[str, str] | None = None
        self.log = work / "steps.log"
        # the commit whose archive the root holds (HEAD may move while a row runs)
        self.commit = nspawn.run(["git", "-C", str(REPO), "rev-parse", "HEAD"]).stdout.strip()

    def sh(self, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``script`` inside the root (not booted), in the checkout, output kept in the log."""
        done = nspawn.run(roots.nspawn_command(self.root, f"cd {SRC} && {script}"),
                          timeout=timeout * (4 if self.platform.emulated else 1), check=False)
        done.stderr = "".join(line for line in done.stderr.splitlines(keepends=True)
                              if not line.startswith(NSPAWN_NOISE))
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"### {script}\n{done.stdout}{done.stderr}\n")
        return done

    def step(self, name: str, body: Callable[[], str]) -> bool:
        """Run one step: ``body`` returns a detail or raises (AssertionError: failed)."""
        started = time.monotonic()
        try:
            detail, status = body(), "passed"
        except (AssertionError, RuntimeError, subprocess.SubprocessError) as error:
            detail, status = " ".join(str(error).split())[-600:], "failed"
        self.steps[name] = {"status": status, "seconds": round(time.monotonic() - started, 1),
                            "detail": detail}
        self.record()  # after each step: a run stopped half-way still leaves its row
        return status == "passed"

    def record(self) -> None:
        emulation = roots.emulator_version() if self.platform.emulated else None
        _matrix_results().record_row(self.platform.name, {
            "platform": self.platform.title, "arch": {"amd64": "x86_64"}.get(
                self.platform.arch, "aarch64"), "emulation": emulation,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": self.commit, **self.facts, "pins": list(self.platform.pins),
            "unavailable": self.unavailable, "steps": self.steps})


def expect(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    tail = (done.stdout + done.stderr)[-1500:]
    if done.returncode != 0:
        raise AssertionError(f"exit {done.returncode}: {tail}")
    for needle in needles:
        assert needle in done.stdout + done.stderr, f"no {needle!r} in: {tail}"
    return ""


def audio_facts(path: Path) -> tuple[float, float]:
    with wave.open(str(path), "rb") as wav:
        assert wav.getsampwidth() == 2, wav.getsampwidth()
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        seconds = wav.getnframes() / wav.getframerate()
    rms = float(np.sqrt(np.mean((frames.astype(np.float64) / 32768.0) ** 2)))
    return seconds, rms


def apt_history(root: Path) -> str:
    history = root / "var/log/apt/history.log"
    return history.read_text(encoding="utf-8", errors="replace") if history.exists() else ""


def run_steps(row: Row) -> None:
    """The matrix's steps in order; one that the rest need (the build) stops the row."""
    agent = f"TTS_AGENT_CACHE__DIR={SRC}/.cache/tts-agent .venv/bin/tts-agent"
    if not row.step("build", lambda: expect(row.sh("./build.sh 2>&1", 3600), "==> ready")):
        return
    row.facts.update(versions(row))
    row.step("check_config", lambda: expect(row.sh(f"{agent} check-config 2>&1", 300)))

    def synth() -> str:
        expect(row.sh(f"{agent} synth --text '{SENTENCE}' --out .cache/matrix-synth.wav", 600))
        seconds, rms = audio_facts(row.root / SRC.lstrip("/") / ".cache/matrix-synth.wav")
        assert SPEECH_S[0] <= seconds <= SPEECH_S[1], f"{seconds:.2f} s of audio"
        assert RMS[0] <= rms <= RMS[1], f"RMS {rms:.4f} of full scale"
        return f"{seconds:.2f} s of speech, RMS {rms:.3f} of full scale"

    row.step("synth", synth)
    row.step("parity", lambda: parity(row))
    if row.platform.emulated:
        row.step("profile", lambda: board_profiles(row, agent))
    # Under emulation the agent is some hundred times slower than on a board: the demo waits
    # longer for it to start, and its first audio may come after the 60 s an utterance waits.
    demo_start = ("TTS_AGENT_DEMO_START_S=1800 TTS_AGENT_AUDIO__PRODUCER_TIMEOUT_S=1800 "
                  "TTS_AGENT_HEALTH__STALL_S=1800 " if row.platform.emulated else "")
    row.step("demo", lambda: expect(row.sh(f"{demo_start}./build.sh demo 2>&1", 1800),
                                    '"finished"', "done: the speech is in"))

    def unit() -> str:
        # two workers (pytest-xdist, as ./build.sh test runs): under emulation each test's
        # processes are many times slower, and the host has two cores
        done = row.sh(".venv/bin/python -m pytest tests/unit -q -n 2 -p no:cacheprovider 2>&1",
                      3600)
        summary = (done.stdout.strip().splitlines() or ["no output"])[-1]
        failed = re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
        if done.returncode != 0:
            raise AssertionError(f"{summary}; failed: {', '.join(failed)}")
        return summary.strip("= ")

    row.step("unit", unit)

    def rebuild() -> str:
        before = apt_history(row.root)
        done = row.sh("./build.sh 2>&1", 1800)
        expect(done, "==> ready")
        assert "installing apt packages" not in done.stdout, done.stdout[-1500:]
        assert apt_history(row.root) == before, "apt ran: /var/log/apt/history.log grew"
        return ""

    row.step("rebuild", rebuild)
    if not row.platform.emulated:
        row.step("systemd", lambda: boot_and_install(row))


BOARDS = {"rpi4-trixie": "rpi4", "rpi5-trixie": "rpi5"}  # fixture root: the profile it must get


def board_profiles(row: Row, agent: str) -> str:
    """``profile --sysroot`` under emulation picks the board from the root's own files (#25
    item 4): the Raspberry Pi 4 and 5 trixie fixtures; and what the bare root itself gets."""
    chosen = {}
    for fixture in [*BOARDS, ""]:
        where = f" --sysroot tests/fixtures/sysroots/{fixture}" if fixture else ""
        done = row.sh(f"{agent} profile --json{where}", 600)
        expect(done)
        chosen[fixture or "the root itself"] = json.loads(done.stdout)["profile"]
    wrong = {key: got for key, got in chosen.items() if key in BOARDS and got != BOARDS[key]}
    assert not wrong, f"chose {wrong}, expected {BOARDS}"
    return ", ".join(f"{key}: {got}" for key, got in chosen.items())


PARITY_MIN = 95.0  # % of sentences whose ids are the training phonemizer's (#25)


def parity(row: Row) -> str:
    """The parity bench in the root: the agent's default espeak-ng build (and, for comparison,
    the distribution's) against the training phonemizer's recorded ids."""
    out = ".cache/matrix-parity.json"
    expect(row.sh(".venv/bin/python bench/phoneme_parity.py --reference-file "
                  "tests/fixtures/training_phonemes.json --builds default,system "
                  f"--summary-only --json {out} 2>&1", 1800))
    document = json.loads((row.root / SRC.lstrip("/") / out).read_text(encoding="utf-8"))
    scores = {s["build"]: s for s in document["raw"]["scores"]}
    share = {key: 100.0 * s["identical"] / max(1, s["sentences"]) for key, s in scores.items()}
    row.facts["espeak_ng"] = scores["default"]["version"]
    detail = "; ".join(f"{key} build (espeak-ng {scores[key]['version']}): {share[key]:.1f}% "
                       f"identical ({scores[key]['identical']}/{scores[key]['sentences']})"
                       for key in ("default", "system") if key in scores)
    assert share["default"] >= PARITY_MIN, detail
    return detail


def versions(row: Row) -> dict[str, Any]:
    script = (".venv/bin/python -c 'import platform; print(platform.python_version())'; "
              ".venv/bin/python -c 'import onnxruntime; print(onnxruntime.__version__)'; "
              "espeak-ng --version")
    lines = [*row.sh(script, 300).stdout.splitlines(), "", "", ""]
    espeak = re.search(r"eSpeak NG text-to-speech: (\S+)", lines[2])
    return {"python": lines[0].strip() or None, "onnxruntime": lines[1].strip() or None,
            "espeak_ng_system": espeak.group(1) if espeak else None}


def boot_and_install(row: Row) -> str:
    """The built root booted with systemd-nspawn; ``systemd/install.sh`` installs the service
    from local wheels (the booted machine has a private network) and it speaks to a file PCM."""
    wheels = "/var/cache/tts-matrix-wheels"
    # the training espeak-ng's wheel too, as docs/operations.md says for an offline install
    tag, _ = espeak_fetch.WHEELS["x86_64" if row.platform.arch == "amd64" else "aarch64"]
    expect(row.sh(f"rm -rf {wheels} && .venv/bin/python -m pip wheel -q --wheel-dir {wheels} "
                  f"'.[voice]' pip 'setuptools>=77' wheel && rm -f {wheels}/edge_tts_agent-* && "
                  f".venv/bin/python -m pip download -q --no-deps --only-binary=:all: "
                  f"--platform {tag} --python-version 3.11 --implementation cp -d {wheels} "
                  f"'{espeak_fetch.REQUIREMENT}'", 1800))
    sink = "/dev/shm/tts-sink.raw"
    (row.root / "etc/asound.conf").write_text(
        f'pcm.!default {{ type file slave.pcm {{ type null }} file "{sink}" format "raw" }}\n')
    (row.root / "etc/hostname").write_text("tts-nspawn\n")
    (row.root / "etc/hosts").write_text("127.0.0.1 localhost\n127.0.1.1 tts-nspawn\n")
    box = nspawn.Machine(row.root)
    try:
        box.boot()
        box.sh(f"install -m 0660 -g audio /dev/null {sink}")
        done = box.sh(f"{SRC}/systemd/install.sh install {SRC} --pip-args "
                      f"'--no-index --find-links {wheels}' 2>&1", check=False, timeout=1800)
        expect(done, "running: systemctl status tts-agent")
        state = box.sh("systemctl is-active tts-agent.service", check=False).stdout.strip()
        assert state == "active", state
        said = box.sh("/opt/tts-agent/venv/bin/tts-agent send --device tts-nspawn speak "
                      f"'{SENTENCE}' --wait --timeout 300 2>&1", check=False, timeout=400)
        expect(said, "finished")
        size = int(box.sh(f"stat -c %s {sink}").stdout.strip() or 0)
        assert size > 44_100, f"{size} bytes in the sink"
        return f"active (running), spoke {size} bytes into the file PCM"
    finally:
        box.poweroff()


@pytest.mark.parametrize("platform", [p for p in roots.PLATFORMS
                                      if not SELECTED or p.name in SELECTED],
                         ids=lambda p: p.name)
def test_platform(platform: roots.Platform) -> None:
    roots.ensure_tools()
    work = roots.CACHE / "runs" / platform.name
    if work.exists():
        nspawn.run(["rm", "-rf", "--one-file-system", str(work)])
    work.mkdir(parents=True)
    row = Row(platform, work)
    try:
        base = roots.base_root(platform)
    except RuntimeError as error:
        said = [line.strip() for line in str(error).splitlines()
                if re.match(r"\s*(Err:|E:|W:)", line) or "resolve" in line]
        row.unavailable = {"command": " ".join(roots.mmdebstrap_args(platform, Path("ROOT"))),
                           "error": " ".join(" ".join(said or [str(error)]).split())[-700:]}
        row.record()
        pytest.skip(f"{platform.name}: no root: {row.unavailable['error']}")
    row.root.mkdir()
    nspawn.copy_tree(base, row.root)
    roots.prepare_root(platform, row.root)
    row.commit = roots.copy_clean_checkout(row.root / SRC.lstrip("/"))
    undo = roots.use_emulator() if platform.emulated else (lambda: None)
    try:
        run_steps(row)
    finally:
        undo()
    failed = {name: step["detail"] for name, step in row.steps.items()
              if step["status"] != "passed"}
    assert not failed, f"{platform.name}: {failed} (log: {row.log})"
    if os.environ.get("TTS_AGENT_PLATFORMS_KEEP") != "1":
        nspawn.run(["rm", "-rf", "--one-file-system", str(row.root)], check=False)
