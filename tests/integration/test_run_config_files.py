"""``tts-agent run`` with a connection file it cannot use: one error line, exit status 2.

The files the MQTT connection needs (password file, TLS CA/certificate/key) are read before
any thread starts. Raised later, while onnxruntime builds the default voice's session on the
preload thread, the error ended in interpreter teardown under that thread and the process
aborted (``terminate called without an active exception``, exit 134) on slower machines. The
agent logs at debug level here, so a thread started before the error would show in stderr
(``voice_preload_started``). The process is the real daemon with the tiny voice.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent.settings import Settings
from tests.support.broker import agent_env, alsa_file_device, free_port
from tests.support.cli import agent_cli

RUNS = 5


def settings_with(tiny_voice_dir: Path, tmp_path: Path, **mqtt: object) -> Settings:
    return Settings(
        device_id="t1",
        models={"dir": tiny_voice_dir.parent, "default_voice": "tiny-test", "watch": False},
        audio={"device": alsa_file_device(tmp_path / "out.raw")},
        mqtt={"host": "127.0.0.1", "port": free_port(), **mqtt},
        cache={"dir": tmp_path / "cache"},
        log={"level": "debug", "format": "json"},
    )


def run_agent(settings: Settings) -> subprocess.CompletedProcess[str]:
    return agent_cli("run", env=agent_env(settings), timeout=120)


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unusable_password_file_is_one_line_and_exit_2_before_any_thread(
    tiny_voice_dir: Path, tmp_path: Path, kind: str,
) -> None:
    path = tmp_path / "secret"
    if kind == "directory":
        path.mkdir()
    settings = settings_with(tiny_voice_dir, tmp_path, username="agent", password_file=path)
    for _ in range(RUNS):
        result = run_agent(settings)
        lines = result.stderr.splitlines()
        assert result.returncode == 2, result.stderr
        assert lines == [lines[0]], f"expected one stderr line, got: {result.stderr}"
        assert lines[0].startswith(
            f"tts-agent run: error: cannot read the MQTT password file {path}: ")
        assert result.stdout == ""


def test_missing_ca_file_is_one_line_and_exit_2(tiny_voice_dir: Path, tmp_path: Path) -> None:
    settings = settings_with(tiny_voice_dir, tmp_path, tls=True, ca_file=tmp_path / "no-ca.pem")
    result = run_agent(settings)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tts-agent run: error: cannot set up TLS"), (
        result.stderr)


def test_the_password_file_content_is_never_shown(tiny_voice_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"hunter2-" + b"x" * 8192)  # too large: refused without being echoed
    settings = settings_with(tiny_voice_dir, tmp_path, username="agent", password_file=path)
    result = run_agent(settings)
    assert result.returncode == 2, result.stderr
    assert "larger than" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout
