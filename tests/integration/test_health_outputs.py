"""The health report against real outside parts: Prometheus's node_exporter reading the textfile
(written by this process, and by the real daemon through the link docs/operations.md sets up),
and the real audio player (its PCM helper process) reporting a missing device. The snapshot's
rules themselves are tested in this process in tests/unit/test_health.py, whose helpers these use.
"""

from __future__ import annotations

import http.client
import re
import shutil
import signal
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
from tests.support.broker import Broker, agent_settings, daemon
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


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")


def exposition(text: str) -> tuple[dict[str, str], dict[str, float]]:
    """node_exporter's answer read back: each family's ``# TYPE``, and the samples (keyed by
    the sample as written, labels included)."""
    types: dict[str, str] = {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        elif line and not line.startswith("#"):
            match = _SAMPLE.match(line)
            assert match, line
            samples[line.rsplit(" ", 1)[0]] = float(match["value"])
    return types, samples


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


@pytest.mark.broker
@pytest.mark.alsa
def test_the_daemons_textfile_says_when_and_why_and_goes_at_a_clean_stop(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path,
    node_exporter: tuple[Path, int],
) -> None:
    """The documented set-up (the agent writes its own directory, node_exporter's links to the
    file): the real agent with no sound card is degraded with that reason, its counters are
    counters, the file says when it was written and is rewritten each interval; SIGTERM
    deletes it, so the link dangles and node_exporter reports the scrape error the dead-device
    alert of docs/operations.md fires on."""
    directory, port = node_exporter
    run_dir = tmp_path / "run"
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              audio={"device": "no_such_pcm_device"})
    settings = settings.model_copy(update={"health": settings.health.model_copy(update={
        "interval_s": 1.0, "state_check_s": 0.5, "prometheus_file": run_dir / "tts_agent.prom"})})
    (directory / "tts_agent.prom").symlink_to(run_dir / "tts_agent.prom")
    started = time.time()
    with daemon(settings, tmp_path / "agent.log") as agent:
        deadline = time.monotonic() + 60
        while True:
            types, samples = exposition(scrape(port))
            if samples.get('tts_agent_health_state{state="degraded"}') == 1 and samples.get(
                    "tts_agent_mqtt_connected") == 1:
                break
            assert agent.poll() is None, (tmp_path / "agent.log").read_text()
            assert time.monotonic() < deadline, f"never degraded and connected: {samples}"
            time.sleep(0.2)
        assert samples["node_textfile_scrape_error"] == 0
        written = samples["tts_agent_last_write_timestamp_seconds"]
        assert started <= written <= time.time()
        reasons = [k for k in samples if k.startswith("tts_agent_health_reason{")]
        assert len(reasons) == samples["tts_agent_health_reasons"] == 1, reasons
        assert reasons[0].startswith('tts_agent_health_reason{reason="audio device unavailable: ')
        assert "no_such_pcm_device" in reasons[0] and samples[reasons[0]] == 1
        counters = {name for name, kind in types.items() if kind == "counter"}
        assert {"tts_agent_requests_total", "tts_agent_audio_device_errors_total",
                "tts_agent_audio_underruns_total", "tts_agent_mqtt_reconnects_total",
                "tts_agent_journal_refused_total"} <= counters
        assert {name for name in types if name.startswith("tts_agent_")
                and name.endswith("_total")} == {n for n in counters if n.startswith("tts_agent_")}
        assert "tts_agent_audio_underruns" not in types  # renamed
        assert types["tts_agent_mqtt_connected"] == "gauge"
        while exposition(scrape(port))[1]["tts_agent_last_write_timestamp_seconds"] == written:
            assert time.monotonic() < deadline + 30, "the file is not rewritten each interval"
            time.sleep(0.2)

        agent.send_signal(signal.SIGTERM)
        assert agent.wait(60) == 0
    assert not (run_dir / "tts_agent.prom").exists()
    types, samples = exposition(scrape(port))
    assert not [name for name in samples if name.startswith("tts_agent_")]
    assert samples["node_textfile_scrape_error"] == 1  # the dangling link: the agent is down
