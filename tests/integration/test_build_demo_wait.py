"""``./build.sh demo`` waits for the agent as a slow board needs (#19 item 5).

The demo used to give up after 30 one-second tries, which an emulated or slow board does not
meet. Its ``wait_ready`` now waits until the agent answers a ping, as long as the agent process
lives, up to ``TTS_AGENT_DEMO_START_S`` (180 s by default, the unit's ``TimeoutStartSec``). The
function is run from build.sh itself, with a stand-in for ``tts-agent send ... ping`` that
answers after a given number of pings (the agent's readiness is not what is tested here) and a
real process as the agent.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO

BUILD_SH = REPO / "build.sh"


def wait_ready_source() -> str:
    """build.sh's ``wait_ready`` function, as it is written there."""
    text = BUILD_SH.read_text(encoding="utf-8")
    match = re.search(r"(?ms)^wait_ready\(\) \{\n.*?^\}\n", text)
    assert match, "build.sh has no wait_ready function"
    return match.group(0)


def run_wait(tmp_path: Path, *, answers_after: int, agent: str = "sleep 300",
             limit: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``wait_ready`` against an agent process (``agent``) and a ``tts-agent`` that answers
    the ``answers_after + 1``-th ping."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    count = tmp_path / "pings"
    stub = bin_dir / "tts-agent"
    stub.write_text(f'#!/bin/sh\nn=$(cat "{count}" 2>/dev/null || echo 0)\nn=$((n + 1))\n'
                    f'echo "$n" > "{count}"\n[ "$n" -gt {answers_after} ]\n', encoding="utf-8")
    stub.chmod(0o755)
    log = tmp_path / "agent.log"
    log.write_text('{"module": "agent.voice.sessions", "event": "voice_split"}\n',
                   encoding="utf-8")
    script = (f'set -euo pipefail\nVENV="{tmp_path / "venv"}"\n'
              "say() { printf '==> %s\\n' \"$*\" >&2; }\n"
              f"{wait_ready_source()}{agent} &\nAGENT_PID=$!\n"
              f'trap \'kill "$AGENT_PID" 2>/dev/null || true\' EXIT\n'
              f'wait_ready demo "{log}"\n')
    env = {k: v for k, v in os.environ.items() if k != "TTS_AGENT_DEMO_START_S"}
    if limit is not None:
        env["TTS_AGENT_DEMO_START_S"] = limit
    return subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=240, check=False)


@pytest.mark.slow
def test_a_slow_start_is_waited_for_beyond_thirty_tries(tmp_path: Path) -> None:
    done = run_wait(tmp_path, answers_after=32)
    assert done.returncode == 0, done.stderr
    assert "==> the agent is ready after" in done.stderr
    assert "last step: voice_split" in done.stderr  # progress shown while waiting


def test_an_agent_that_exits_ends_the_wait_with_its_log(tmp_path: Path) -> None:
    done = run_wait(tmp_path, answers_after=10_000, agent="true")
    assert done.returncode == 1
    assert "the agent exited before it was ready; its log:" in done.stderr
    assert '"voice_split"' in done.stderr


def test_the_deadline_is_the_setting(tmp_path: Path) -> None:
    done = run_wait(tmp_path, answers_after=10_000, limit="2")
    assert done.returncode == 1
    assert "not ready after 2 s (TTS_AGENT_DEMO_START_S)" in done.stderr
    refused = run_wait(tmp_path / "bad", answers_after=0, limit="soon")
    assert refused.returncode == 2 and "whole seconds" in refused.stderr
