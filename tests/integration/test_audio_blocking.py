"""A blocked audio device never freezes the process (issue #14, item 12).

pyalsaaudio keeps the GIL while it opens and configures a PCM (``snd_pcm_open``,
``snd_pcm_hw_params``), stops it (``snd_pcm_drop``) and closes it; alsa-lib's ``file``
plugin opens its file in ``hw_params`` with a blocking ``open()``. A PCM writing into a named
pipe that nobody reads therefore held the whole interpreter: no MQTT, no health, no watchdog.
The PCM now lives in a helper process (:mod:`agent.audio.pcm_host`) that the player waits
for with a deadline.

The devices here are real alsa-lib ``file`` PCMs over named pipes: one nobody reads (the open
blocks), one whose reader never reads (the writes block). A test that ran in the test's own
process and froze it could not fail by itself, so those tests start a guard process first
that becomes the pipe's reader after :data:`GUARD_S`: a regression then fails the test's
bounded waits instead of hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np
import pytest

from tests.support.alsa_sink import (
    AlsaConfig,
    audio_settings,
    closed_item,
    read_samples,
    running_player,
    tone,
    trim_silence,
    wait_until,
)
from tests.support.broker import Broker, Recorder, agent_settings, daemon
from tests.support.notify_socket import NotifySocket

pytestmark = pytest.mark.alsa

GUARD_S = 120
"""When the guard process starts reading a pipe (far beyond every wait in these tests)."""
FAST_DEVICE = {"device_timeout_s": 0.5}
"""Give up on a blocked device call quickly (the default suits real devices)."""


class PipeReader:
    """Reads a named pipe on a thread of its own, from now on, until :meth:`finish`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._data = bytearray()
        self._thread = threading.Thread(target=self._loop, name="pipe-reader", daemon=True)
        self._thread.start()

    def data(self) -> bytes:
        with self._lock:
            return bytes(self._data)

    def finish(self) -> bytes:
        """Stop once the writer has gone; everything read."""
        self._stopped.set()
        while self._thread.is_alive():
            # Unblock a reader waiting in open() for a writer that will not come.
            with suppress(OSError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            self._thread.join(0.05)
        return self.data()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            with open(self.path, "rb", buffering=0) as pipe:  # waits for a writer
                while block := pipe.read(65536):
                    with self._lock:
                        self._data.extend(block)


@contextmanager
def guard(path: Path) -> Iterator[None]:
    """A process that reads ``path`` after :data:`GUARD_S`, so a frozen test unfreezes."""
    code = ("import sys, time\ntime.sleep(float(sys.argv[2]))\n"
            "with open(sys.argv[1], 'rb') as f:\n    while f.read(65536): pass\n")
    process = subprocess.Popen([sys.executable, "-c", code, str(path), str(GUARD_S)])
    try:
        yield
    finally:
        process.kill()
        process.wait(10)


def helper_processes() -> list[int]:
    """This process's children that run the PCM helper."""
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with suppress(OSError):
            for pid in (task / "children").read_text().split():
                with suppress(OSError):
                    if b"agent.audio.pcm_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        pids.append(int(pid))
    return pids


# -- the player in this process --------------------------------------------------------------

def test_an_open_that_blocks_degrades_the_player_and_the_process_runs_on(
    alsa: AlsaConfig,
) -> None:
    pipe = alsa.add_pipe("spk")
    settings = audio_settings("spk", **FAST_DEVICE)
    with guard(pipe), running_player(settings) as (player, events):
        # This thread runs while the player's open is blocked, and the player says why.
        wait_until(lambda: player.stats()["state"] == "degraded", "the player reports degraded")
        reason = player.stats()["reason"] or ""
        assert "cannot open ALSA device 'spk'" in reason and "did not answer" in reason
        assert player.stats()["alive"]
        player.submit(closed_item("early", tone(0.2, 440)))
        failed = events.wait_for("failed", "early")
        assert "cannot open ALSA device 'spk'" in (failed.reason or "")
        assert len(helper_processes()) == 1  # the blocked helper is kept, not respawned

        reader = PipeReader(pipe)  # someone reads the pipe: the pending open completes
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        samples = tone(0.3, 550)
        player.submit(closed_item("late", samples))
        events.wait_for("finished", "late")
        assert events.kinds("early") == ["failed"]
    played, _, _ = trim_silence(read_samples(reader.finish())[:, 0])
    assert np.array_equal(played, samples)
    assert helper_processes() == []  # closing the player ends its helper


def test_closing_the_player_while_its_open_is_blocked_ends_its_helper(alsa: AlsaConfig) -> None:
    pipe = alsa.add_pipe("spk")
    with guard(pipe), running_player(audio_settings("spk", **FAST_DEVICE)) as (player, _):
        wait_until(lambda: player.stats()["state"] == "degraded", "the player reports degraded")
        assert len(helper_processes()) == 1
    assert helper_processes() == []  # closed without waiting for the open


def test_a_write_that_never_returns_fails_the_utterance_and_the_player_recovers(
    alsa: AlsaConfig,
) -> None:
    sink = alsa.add_fifo("spk")  # a reader that holds the pipe but reads nothing yet
    settings = audio_settings("spk", **FAST_DEVICE)
    with guard(sink.path), running_player(settings) as (player, events):
        player.submit(closed_item("stuck", tone(10.0, 300)))
        events.wait_for("started", "stuck")  # the pipe fills; the next write blocks for good
        failed = events.wait_for("failed", "stuck")
        assert "did not answer" in (failed.reason or "")
        wait_until(lambda: player.stats()["state"] == "degraded", "the player reports degraded")
        assert player.stats()["device_errors"] >= 1

        sink.release()  # the device takes audio again
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        samples = tone(0.3, 550)
        player.submit(closed_item("after", samples))
        events.wait_for("finished", "after")
        assert events.kinds("stuck") == ["started", "failed"]
    played, _, _ = trim_silence(read_samples(sink.finish())[:, 0])
    assert np.array_equal(played[len(played) - len(samples):], samples)


def test_a_helper_that_dies_mid_utterance_fails_it_and_the_player_recovers(
    alsa: AlsaConfig,
) -> None:
    sink = alsa.add_fifo("spk")
    with running_player(audio_settings("spk", **FAST_DEVICE)) as (player, events):
        player.submit(closed_item("doomed", tone(10.0, 300)))
        events.wait_for("started", "doomed")  # blocked on the pipe, mid-utterance
        (pid,) = helper_processes()
        os.kill(pid, signal.SIGKILL)  # as if alsa-lib aborted
        failed = events.wait_for("failed", "doomed")
        assert "helper process" in (failed.reason or "")
        assert player.stats()["state"] == "degraded"

        sink.release()
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        samples = tone(0.3, 550)
        player.submit(closed_item("after", samples))
        events.wait_for("finished", "after")
        assert pid not in helper_processes()
    played, _, _ = trim_silence(read_samples(sink.finish())[:, 0])
    assert np.array_equal(played[len(played) - len(samples):], samples)


# -- the daemon ------------------------------------------------------------------------------

@pytest.mark.broker
def test_the_daemon_answers_and_reports_while_its_audio_open_is_blocked(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, notify: NotifySocket,
) -> None:
    from agent.mqtt.topics import Namespace

    dev = Namespace("tts").device("t1")
    pipe = tmp_path / "speaker.pipe"
    os.mkfifo(pipe)  # nobody reads it: alsa-lib's open() of the file PCM blocks
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", audio={
        "device": f"file:'{pipe}',raw", "reopen_interval_s": 0.2, **FAST_DEVICE})
    settings = settings.model_copy(update={"health": settings.health.model_copy(
        update={"state_check_s": 0.5, "interval_s": 3600})})
    filters = [dev.events.as_filter(), dev.health.as_filter(), dev.status.as_filter()]

    def final(rec: Recorder, request_id: str) -> dict[str, object]:
        return rec.wait_json(dev.events, lambda e: e["id"] == request_id and e["final"], 60)

    with Recorder(mqtt_broker.settings(), filters, "watch") as rec, daemon(
            settings, tmp_path / "agent.log", env=notify.env(WATCHDOG_USEC="1000000")) as agent:
        notify.receive_until("READY", timeout=60)
        rec.wait_json(dev.status, lambda p: p["state"] == "online", 60)
        rec.publish(dev.command("ping"), {"id": "p1"})
        assert final(rec, "p1")["event"] == "pong"
        degraded = rec.wait_json(dev.health, lambda h: h["audio"]["state"] == "degraded", 60)
        assert degraded["state"] == "degraded"
        assert "did not answer" in degraded["audio"]["reason"]
        assert degraded["reasons"][0].startswith("audio device unavailable: ")
        # The watchdog goes on: no worker counts as hung.
        notify.receive_until("WATCHDOG", timeout=30)
        notify.receive_until("WATCHDOG", timeout=30)
        rec.publish(dev.command("speak"), {"id": "s1", "text": "Hello there."})
        blocked = final(rec, "s1")
        assert blocked["event"] == "failed" and "did not answer" in str(blocked["reason"])
        rec.publish(dev.command("ping"), {"id": "p2"})
        assert final(rec, "p2")["event"] == "pong"

        reader = PipeReader(pipe)  # a reader appears: the device opens and speech plays
        rec.wait_json(dev.health, lambda h: (h["uptime_s"] > degraded["uptime_s"]
                                             and h["audio"]["state"] == "ok"), 60)
        rec.publish(dev.command("speak"), {"id": "s2", "text": "Hello there."})
        assert final(rec, "s2")["event"] == "finished"
        agent.terminate()
        assert agent.wait(60) == 0
    assert np.any(read_samples(reader.finish()))
