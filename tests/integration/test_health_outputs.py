"""The health report against real outside parts: Prometheus's node_exporter reading the textfile,
and the real audio player (its PCM helper process) reporting a missing device. The snapshot's
rules themselves are tested in this process in tests/unit/test_health.py, whose helpers these use.
"""

from __future__ import annotations

import http.client
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.health.prometheus import render, write_textfile
from agent.health.snapshot import Health
from agent.health.sysinfo import SystemProbe
from agent.settings import Settings
from tests.unit.test_health import (  # the unit tests' fixtures, shared
    FakeClock,
    clock,
    degraded_snapshot,
    fake_sysroot,
    health,
    settings,
)

__all__ = ["clock", "health", "settings"]  # fixtures: pytest finds them in this module


def scrape(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        connection.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def node_exporter(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if binary is None:
        pytest.skip("prometheus-node-exporter is not installed")
    directory = tmp_path / "textfile"
    directory.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={directory}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                scrape(port)
                break
            except OSError:
                assert proc.poll() is None, "node_exporter exited"
                assert time.monotonic() < deadline, "node_exporter did not come up"
                time.sleep(0.1)
        yield directory, port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_node_exporter_reads_the_textfile(health: Health, clock: FakeClock,
                                          node_exporter: tuple[Path, int]) -> None:
    directory, port = node_exporter
    write_textfile(directory / "tts_agent.prom", render(degraded_snapshot(health, clock)))
    scraped = scrape(port)
    assert re.search(r"^node_textfile_scrape_error 0$", scraped, re.MULTILINE), scraped[-2000:]
    assert 'tts_agent_health_state{state="degraded"} 1' in scraped
    assert 'tts_agent_synthesis_seconds{quantile="0.95"} 0.4' in scraped
    assert re.search(r'^tts_agent_requests_total\{outcome="failed"\} 1$', scraped, re.MULTILINE)


@pytest.mark.alsa
def test_the_real_player_with_a_missing_device_degrades_the_report(
    settings: Settings, tmp_path: Path,
) -> None:
    from agent.audio.player import AudioPlayer
    from tests.support.alsa_sink import Events  # the player's reporter

    player = AudioPlayer(settings.audio.model_copy(update={"device": "no_such_pcm_device"}),
                         Events())
    probe = SystemProbe(tmp_path, sysroot=fake_sysroot(tmp_path / "root"))
    health = Health(settings, probe=probe)
    health.add_provider("audio", player.stats)
    assert health.snapshot()["state"] == "ok"  # not probed yet
    player.start()
    try:
        deadline = time.monotonic() + 20
        while (snap := health.snapshot())["state"] == "ok":
            assert time.monotonic() < deadline, "the player never reported the missing device"
            time.sleep(0.05)
    finally:
        player.close()
    assert snap["state"] == "degraded"
    assert snap["reasons"][0].startswith("audio device unavailable: ")
    assert "no_such_pcm_device" in snap["reasons"][0]
    assert snap["audio"]["state"] == "degraded"
