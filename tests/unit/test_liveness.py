"""Liveness from progress, and the systemd watchdog that only pings while workers progress."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from agent.health.liveness import Liveness, Watchdog
from agent.health.sdnotify import Notifier
from tests.support.clock import FakeClock
from tests.support.notify_socket import NotifySocket


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


class Component:
    """Something that keeps its own marks, like SynthesisWorker (busy_since, steps, alive)."""

    def __init__(self) -> None:
        self.busy_since: float | None = None
        self.steps = 0
        self.alive = False


def test_busy_longer_than_stall_is_hung_and_progress_revives_it() -> None:
    clock = FakeClock()
    liveness = Liveness(stall_s=30, clock=clock)
    worker = Component()
    liveness.watch("synthesis", busy_since=lambda: worker.busy_since)
    assert liveness.check().workers["synthesis"].state == "idle"

    worker.busy_since = clock.now
    clock.advance(29)
    status = liveness.check().workers["synthesis"]
    assert (status.state, status.busy_s) == ("busy", 29)
    assert liveness.check().alive

    clock.advance(2)
    report = liveness.check()
    assert not report.alive
    assert report.workers["synthesis"].state == "hung"
    assert report.problems == [
        "worker synthesis hung: busy on one item for 31 s (limit 30 s)"]

    worker.busy_since = clock.now  # the next sentence started: progress
    assert liveness.check().alive
    clock.advance(31)
    worker.busy_since = None  # back to waiting for the next item
    clock.advance(3600)  # idle for long is fine without a beat timeout
    assert liveness.check().alive


def test_a_loop_that_stops_beating_is_hung() -> None:
    clock = FakeClock()
    liveness = Liveness(stall_s=30, clock=clock)
    mqtt = Component()
    liveness.watch("mqtt", busy_since=lambda: None, progress=lambda: mqtt.steps,
                   beat_timeout_s=10)
    clock.advance(9)
    mqtt.steps += 1  # a turn of its loop, seen by the next check
    assert liveness.check().alive
    clock.advance(9)
    assert liveness.check().alive
    clock.advance(2)
    report = liveness.check()
    assert report.workers["mqtt"].state == "hung"
    assert report.problems == ["worker mqtt hung: no heartbeat for 11 s (limit 10 s)"]
    mqtt.steps += 1
    assert liveness.check().alive


def test_busy_worker_is_judged_by_its_stall_limit_not_its_beats() -> None:
    clock = FakeClock()
    liveness = Liveness(stall_s=30, clock=clock)
    audio = Component()
    liveness.watch("audio", busy_since=lambda: audio.busy_since, progress=lambda: audio.steps,
                   stall_s=60, beat_timeout_s=5)
    audio.busy_since = clock.now
    clock.advance(50)  # no beats while writing one long utterance
    assert liveness.check().workers["audio"].state == "busy"
    clock.advance(11)
    assert liveness.check().workers["audio"].state == "hung"


def test_a_worker_idle_again_after_an_error_is_idle() -> None:
    clock = FakeClock()
    liveness = Liveness(stall_s=1, clock=clock)
    worker = Component()
    liveness.watch("synthesis", busy_since=lambda: worker.busy_since)

    def step() -> None:  # the shape of SynthesisWorker's loop: busy_since cleared in finally
        worker.busy_since = clock.now
        try:
            assert liveness.check().workers["synthesis"].state == "busy"
            raise RuntimeError("synthesis failed")
        finally:
            worker.busy_since = None

    with pytest.raises(RuntimeError):
        step()
    clock.advance(100)
    assert liveness.check().workers["synthesis"].state == "idle"


def test_a_worker_whose_thread_exited_is_dead() -> None:
    liveness = Liveness(stall_s=30)
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="synthesis-worker")
    liveness.watch("synthesis", busy_since=lambda: None, alive=thread.is_alive)
    assert liveness.check().alive  # not started yet: not dead
    thread.start()
    assert liveness.check().alive
    release.set()
    thread.join()
    report = liveness.check()
    assert report.workers["synthesis"].state == "dead"
    assert report.problems == ["worker synthesis dead: its thread has exited"]
    liveness.clear()  # the agent stops watching before it stops its workers
    assert liveness.check().alive
    assert liveness.check().workers == {}


def test_names_are_unique() -> None:
    liveness = Liveness(stall_s=30)
    liveness.watch("audio", busy_since=lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        liveness.watch("audio", busy_since=lambda: None)


def test_watchdog_pings_at_half_the_interval_and_stops_while_a_worker_is_hung(
    notify: NotifySocket,
) -> None:
    liveness = Liveness(stall_s=0.5)
    synthesis = Component()
    liveness.watch("synthesis", busy_since=lambda: synthesis.busy_since)
    liveness.watch("audio", busy_since=lambda: None)
    notifier = Notifier(notify.address, watchdog_usec=200_000)
    watchdog = Watchdog(liveness, notifier)
    assert watchdog.interval_s == 0.2
    release = threading.Event()

    def hang() -> None:
        synthesis.busy_since = time.monotonic()
        try:
            release.wait(30)  # an inference that never returns
        finally:
            synthesis.busy_since = None

    assert watchdog.start()
    try:
        for _ in range(3):
            message = notify.receive()
            assert message is not None and message.fields == {"WATCHDOG": "1"}

        hung = threading.Thread(target=hang)
        hung.start()
        wait_for(lambda: watchdog.withheld >= 1)
        notify.drain()  # pings decided before the stall was seen
        withheld = watchdog.withheld
        wait_for(lambda: watchdog.withheld >= withheld + 3)
        assert notify.drain() == []  # three due pings, none sent
        assert liveness.check().workers["synthesis"].state == "hung"

        release.set()
        hung.join()
        message = notify.receive()
        assert message is not None and message.fields == {"WATCHDOG": "1"}
    finally:
        release.set()
        watchdog.stop()
    assert not watchdog.active


def test_no_watchdog_configured_means_no_thread(notify: NotifySocket) -> None:
    liveness = Liveness(stall_s=30)
    assert not Watchdog(liveness, Notifier(notify.address)).start()
    assert not Watchdog(liveness, Notifier(None), interval_s=1.0).start()
    assert notify.drain() == []


def test_watching_a_component_that_keeps_its_own_marks() -> None:
    clock = FakeClock()
    liveness = Liveness(stall_s=30, clock=clock)
    part = Component()
    liveness.watch("synthesis", busy_since=lambda: part.busy_since, alive=lambda: part.alive,
                   progress=lambda: part.steps, beat_timeout_s=5)
    clock.advance(60)
    assert liveness.check().alive  # not started yet: neither dead nor silent too long
    part.alive = True
    part.steps += 1
    assert liveness.check().workers["synthesis"].state == "idle"

    clock.advance(4)
    part.steps += 1  # an idle turn of its loop, seen by the next check
    assert liveness.check().alive
    clock.advance(5)
    assert liveness.check().alive
    clock.advance(1)
    report = liveness.check()
    assert report.problems == ["worker synthesis hung: no heartbeat for 6 s (limit 5 s)"]

    part.busy_since = clock.now  # a long sentence: no turns, judged by the stall limit
    part.steps += 1
    clock.advance(29)
    assert liveness.check().workers["synthesis"].state == "busy"
    clock.advance(2)
    assert liveness.check().workers["synthesis"].state == "hung"

    part.alive = False
    report = liveness.check()
    assert report.workers["synthesis"].state == "dead"
    assert report.problems == ["worker synthesis dead: its thread has exited"]


def test_watch_needs_a_counter_for_a_beat_limit() -> None:
    with pytest.raises(ValueError, match="progress counter"):
        Liveness(stall_s=30).watch("audio", busy_since=lambda: None, beat_timeout_s=5)


def test_clear_stops_judging_workers_that_are_shutting_down() -> None:
    clock = FakeClock()
    liveness = Liveness(stall_s=1, clock=clock)
    busy_since = clock.now
    liveness.watch("audio", busy_since=lambda: busy_since)
    clock.advance(5)
    assert not liveness.check().alive
    liveness.clear()
    assert liveness.check().alive
    assert liveness.check().workers == {}
