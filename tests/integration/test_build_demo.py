"""``./build.sh demo`` end to end, once set up: build.sh's own ``demo`` function (its set-up,
which installs packages and the shared virtual environment, is left out) with a real Mosquitto
it starts, the real agent process (``tts-agent run``) speaking the tiny voice into the ALSA
file PCM it picks on a machine without a sound card (an ``aplay`` that lists none stands in
for the card check), and ``tts-agent send --wait --progress``.

The demo prints one audio length, the ``finished`` event's ``audio_s`` (#28 item 14): the WAV
file it leaves also holds the device's padding, so its length was a second, different one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.host import TINY_VOICE_ENV

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

BUILD_SH = REPO / "build.sh"
_SECONDS = re.compile(r"\b\d+(?:\.\d+)? ?s of (?:speech|audio)\b")


def function_source(name: str) -> str:
    """build.sh's function ``name``, as it is written there."""
    text = BUILD_SH.read_text(encoding="utf-8")
    match = re.search(rf"(?ms)^{name}\(\) \{{.*?^\}}\n", text)
    assert match, f"build.sh has no {name} function"
    return match.group(0)


def test_the_demo_speaks_and_prints_one_audio_length(tiny_voice_dir: Path,
                                                     tmp_path: Path) -> None:
    root, bin_dir = tmp_path / "checkout", tmp_path / "bin"
    (root / ".cache").mkdir(parents=True)
    (root / "models").symlink_to(tiny_voice_dir.parent)
    (root / ".venv" / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    agent = root / ".venv" / "bin" / "tts-agent"
    agent.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m agent "$@"\n',
                     encoding="utf-8")
    (bin_dir / "aplay").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")  # no card listed
    for stub in (agent, bin_dir / "aplay"):
        stub.chmod(0o755)
    script = (f'set -euo pipefail\nROOT="{root}"\nVENV="$ROOT/.venv"\nPY="{sys.executable}"\n'
              + "".join(function_source(name) for name in ("say", "wait_ready", "demo"))
              + 'demo "Hello there. This is the demo."\n')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TTS_AGENT_") and k not in ("ALSA_CONFIG_PATH", "NO_COLOR")}
    env.update({"PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}",
                "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", **TINY_VOICE_ENV})
    done = subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=240, check=False, cwd=root)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["event"] for e in events] == ["accepted", "started", "finished"]
    audio_s = events[-1]["audio_s"]
    assert audio_s > 0
    assert "==> step 2: no sound card" in done.stderr
    assert _SECONDS.findall(done.stderr) == []  # no second length beside audio_s
    assert f"==> done: the speech is in {root}/demo.wav" in done.stderr
    with wave.open(str(root / "demo.wav"), "rb") as wav:  # the speech is in the file
        assert wav.getnframes() / wav.getframerate() >= audio_s
