"""``tts-agent profile`` in a fresh process: the console script works and choosing a profile
stays light (the in-process tests are tests/unit/test_hardware_cli.py and
tests/unit/test_hardware_profiles.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.cli import agent_cli
from tests.support.hardware_support import REPO, sysroot


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "agent.toml"
    lines = ['device_id = "t1"', "[cache]", f'dir = "{tmp_path / "cache"}"']
    path.write_text("\n".join(lines) + "\n")
    return path


def test_profile_console_script_in_a_fresh_process(tmp_path: Path) -> None:
    done = agent_cli("profile", "--json", "--sysroot", sysroot("container-2cpu"),
                     "--config", _config(tmp_path), cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["profile"], data["intra_op_num_threads"]) == ("generic-x86_64", 2)
    assert data["hardware"]["cgroup_cpu_quota"] == 2.0


def test_resolving_a_profile_loads_neither_the_voice_nor_onnxruntime() -> None:
    """``tts-agent profile`` and the start-up choice of threads stay light."""
    code = ("import sys\n"
            "from agent.hardware.effective import resolve_profile\n"
            "from agent.hardware.tuning import candidate_configs\n"
            "from agent.settings import Settings\n"
            "resolve_profile(Settings(device_id='t1'), sysroot=sys.argv[1], use_tune=False)\n"
            "heavy = [m for m in sys.modules if m.startswith(('onnxruntime', 'agent.voice.',\n"
            "         'agent.library', 'agent.pipeline', 'agent.mqtt', 'agent.daemon'))]\n"
            "heavy = [m for m in heavy if m != 'agent.voice.streaming']  # settings' defaults\n"
            "print(heavy)\n")
    result = subprocess.run([sys.executable, "-c", code, str(sysroot("rpi4"))],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
