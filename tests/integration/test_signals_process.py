"""``tts-agent run`` stops and reloads when the kernel hands the signal to a worker thread.

The kernel may deliver a process-directed signal to any thread that does not block it, and
Python runs handlers on the main thread only. Each signal here is sent with ``tgkill`` to one
worker thread of the real daemon (:mod:`tests.support.threads`), a different one each time;
the daemon must still reload (``RELOADING=1`` ... ``READY=1``) or stop (``STOPPING=1``, exit
status 0). Real Mosquitto, alsa-lib into a file PCM, the tiny voice, a stand-in notify socket.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from agent.settings import Settings
from tests.support import stall_voice
from tests.support.broker import Broker, agent_settings, daemon
from tests.support.notify_socket import NotifySocket
from tests.support.threads import tgkill, worker_threads

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

WAIT_S = 30.0  # generous bounds on waiting for the daemon; never asserted as timings
STOP_RUNS = 5  # per stop signal: SIGTERM and SIGINT, 10 runs in all
RELOADS = 10


@pytest.fixture()
def settings(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Settings:
    return agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")


def to_worker(process: subprocess.Popen[bytes], signum: int, turn: int) -> int:
    """Send ``signum`` to one of the daemon's worker threads (a different one each turn)."""
    tids = worker_threads(process.pid, signum)
    assert tids, "the daemon has no worker thread that takes the signal"
    tid = tids[turn % len(tids)]
    tgkill(process.pid, tid, signum)
    return tid


def settle() -> None:
    """Give the main thread a moment to block in its wait, the case under test (the outcome
    does not depend on it)."""
    threading.Event().wait(0.2)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_sent_to_a_worker_thread_stops_the_daemon(
    settings: Settings, tmp_path: Path, signum: int,
) -> None:
    for run in range(STOP_RUNS):
        notify = NotifySocket(tmp_path / f"notify-{run}.sock")
        log_path = tmp_path / f"agent-{run}.log"
        try:
            with daemon(settings, log_path, env=notify.env()) as agent:
                notify.receive_until("READY", timeout=60)
                settle()
                tid = to_worker(agent, signum, run)
                stopping = notify.receive_until("STOPPING", timeout=WAIT_S)
                assert stopping[-1].fields["STOPPING"] == "1", (
                    f"run {run}: {signal.Signals(signum).name} sent to thread {tid} was lost")
                assert agent.wait(60) == 0
        finally:
            notify.close()


def test_reload_signals_sent_to_worker_threads_each_reload_then_stop(
    settings: Settings, tmp_path: Path, notify: NotifySocket,
) -> None:
    with daemon(settings, tmp_path / "agent.log", env=notify.env()) as agent:
        notify.receive_until("READY", timeout=60)
        for turn in range(RELOADS):
            settle()
            tid = to_worker(agent, signal.SIGHUP, turn)
            reloading = notify.receive_until("RELOADING", timeout=WAIT_S)
            assert reloading[-1].fields["RELOADING"] == "1", f"SIGHUP to {tid} was lost"
            ready = notify.receive_until("READY", timeout=60)[-1]
            assert ready.fields["STATUS"].startswith("reloaded:")
        settle()
        to_worker(agent, signal.SIGTERM, RELOADS)
        notify.receive_until("STOPPING", timeout=WAIT_S)
        assert agent.wait(60) == 0


def hanging_warm_up_voice(models: Path, *, version: str = "1.0.0") -> None:
    """The stall voice with a length scale of 4 in its own config: its warm-up at load runs
    an inference that never returns, so whatever loads it (the start, a reload) waits for
    ever."""
    from agent.voice.bundle import write_manifest

    bundle = models / stall_voice.VOICE
    if not bundle.is_dir():
        stall_voice.build_bundle(models)
    config_path = bundle / f"{stall_voice.VOICE}.onnx.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["inference"]["length_scale"] = 4.0
    config_path.write_text(json.dumps(config), encoding="utf-8")
    write_manifest(bundle, voice=stall_voice.VOICE, version=version,
                   sample_rate=config["audio"]["sample_rate"],
                   variants={"fp32": f"{stall_voice.VOICE}.onnx"},
                   config=config_path.name, source="tests/test_signals_process.py")


@pytest.mark.parametrize("target", ["process", "worker"])
def test_a_stop_during_a_start_that_never_ends_stops_the_daemon(
    mqtt_broker: Broker, tmp_path: Path, notify: NotifySocket, target: str,
) -> None:
    models = tmp_path / "models"
    hanging_warm_up_voice(models)
    settings = agent_settings(mqtt_broker, models, tmp_path / "agent", voice=stall_voice.VOICE)
    log_path = tmp_path / "agent.log"
    with daemon(settings, log_path, env=notify.env()) as agent:
        starting = notify.receive_until("STATUS", timeout=60)
        assert starting[-1].fields["STATUS"].startswith("starting: loading voice")
        settle()
        if target == "process":
            agent.send_signal(signal.SIGTERM)
        else:
            to_worker(agent, signal.SIGTERM, 0)
        messages = notify.receive_until("STOPPING", timeout=WAIT_S)
        assert agent.wait(60) == 0
    assert not any("READY" in m for m in messages)
    log = log_path.read_text(encoding="utf-8")
    assert "start_abandoned" in log


@pytest.mark.parametrize("target", ["process", "worker"])
def test_a_stop_while_a_reloaded_voice_never_warms_up_stops_the_daemon(
    mqtt_broker: Broker, tmp_path: Path, notify: NotifySocket, target: str,
) -> None:
    models = tmp_path / "models"
    stall_voice.build_bundle(models)  # loads and warms up normally
    settings = agent_settings(mqtt_broker, models, tmp_path / "agent", voice=stall_voice.VOICE)
    log_path = tmp_path / "agent.log"
    with daemon(settings, log_path, env=notify.env()) as agent:
        notify.receive_until("READY", timeout=60)
        hanging_warm_up_voice(models, version="2.0.0")  # the new version never warms up
        agent.send_signal(signal.SIGHUP)
        notify.receive_until("RELOADING", timeout=WAIT_S)
        settle()
        if target == "process":
            agent.send_signal(signal.SIGTERM)
        else:
            to_worker(agent, signal.SIGTERM, 0)
        notify.receive_until("STOPPING", timeout=WAIT_S)
        assert agent.wait(60) == 0
