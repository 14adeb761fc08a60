"""The main thread's signal loop (:func:`agent.daemon.mainloop.run_until_signal`) when the
kernel hands the signal to a worker thread.

Python runs signal handlers on the main thread only; a signal delivered to another thread
(the kernel picks any thread that does not block it) must still wake the main thread's wait.
Each signal here is sent with ``signal.pthread_kill`` from a worker thread to itself. The
service is a stand-in (wiring only): what is under test is the loop.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from agent.daemon.mainloop import run_until_signal

WAIT_S = 10.0  # generous bound on waiting for the loop; never asserted as a timing
REPETITIONS = 10


class FakeService:
    """Records what the loop asks of it."""

    def __init__(self, *, slow_start: bool = False) -> None:
        self.slow_start = slow_start
        self.starting = threading.Event()
        self.start_cancelled = False
        self.ready = threading.Event()
        self.reloaded = threading.Semaphore(0)
        self.reloads = 0
        self.stops = 0

    def start(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """A slow start waits (as for the default voice) until ``cancelled`` says stop."""
        self.starting.set()
        deadline = threading.Event()
        while self.slow_start and not deadline.wait(0.05):
            if cancelled():
                self.start_cancelled = True
                return

    def notify_ready(self) -> None:
        self.ready.set()

    def reload(self, load_settings: Callable[[], object] | None = None) -> str:
        self.reloads += 1
        self.reloaded.release()
        return "reloaded"

    def stop(self) -> bool:
        self.stops += 1
        return True


def from_worker(signum: int) -> None:
    """Deliver ``signum`` to the calling (non-main) thread."""
    signal.pthread_kill(threading.get_ident(), signum)


@contextmanager
def rescue_after(timeout: float) -> Iterator[list[bool]]:
    """If the loop has not returned within ``timeout``, note it and wake the main thread with
    a SIGTERM sent to the main thread itself (which any loop handles), so the test fails
    instead of hanging."""
    fired: list[bool] = []
    done = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def rescue() -> None:
        if not done.wait(timeout):
            fired.append(True)
            signal.pthread_kill(main, signal.SIGTERM)

    thread = threading.Thread(target=rescue, name="rescue", daemon=True)
    thread.start()
    try:
        yield fired
    finally:
        done.set()
        thread.join(WAIT_S)


def settle() -> None:
    """Give the main thread a moment to block in its wait, the case under test (the outcome
    does not depend on it: a signal that comes earlier must work too)."""
    threading.Event().wait(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_delivered_to_a_worker_thread_stops_the_loop(signum: int) -> None:
    assert threading.current_thread() is threading.main_thread()
    for _ in range(REPETITIONS):
        service = FakeService()

        def sender(service: FakeService = service) -> None:
            assert service.ready.wait(WAIT_S)
            settle()
            from_worker(signum)

        thread = threading.Thread(target=sender, name="worker", daemon=True)
        with rescue_after(WAIT_S) as rescued:
            thread.start()
            assert run_until_signal(service) == 0
        thread.join(WAIT_S)
        assert not rescued, f"{signal.Signals(signum).name} sent to a worker thread was lost"
        assert service.stops == 1


def test_reload_signals_delivered_to_a_worker_thread_each_reload() -> None:
    service = FakeService()
    reloads_seen: list[int] = []

    def sender() -> None:
        assert service.ready.wait(WAIT_S)
        for _ in range(REPETITIONS):
            settle()
            from_worker(signal.SIGHUP)
            if not service.reloaded.acquire(timeout=WAIT_S):
                break  # lost: the rescue ends the loop
            reloads_seen.append(service.reloads)
        settle()
        from_worker(signal.SIGTERM)

    thread = threading.Thread(target=sender, name="worker", daemon=True)
    with rescue_after(3 * WAIT_S) as rescued:
        thread.start()
        assert run_until_signal(service) == 0
    thread.join(WAIT_S)
    assert not rescued, "a signal sent to a worker thread was lost"
    assert reloads_seen == list(range(1, REPETITIONS + 1))
    assert service.stops == 1


def test_handlers_and_wakeup_fd_are_put_back() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT,
                                                       signal.SIGHUP)}
    service = FakeService()

    def sender() -> None:
        assert service.ready.wait(WAIT_S)
        from_worker(signal.SIGTERM)

    thread = threading.Thread(target=sender, name="worker", daemon=True)
    with rescue_after(WAIT_S) as rescued:
        thread.start()
        run_until_signal(service)
    thread.join(WAIT_S)
    assert not rescued
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert signal.set_wakeup_fd(-1) == -1  # none left behind


def test_a_stop_signal_during_a_slow_start_cuts_it_short() -> None:
    for _ in range(REPETITIONS):
        service = FakeService(slow_start=True)

        def sender(service: FakeService = service) -> None:
            assert service.starting.wait(WAIT_S)
            settle()
            from_worker(signal.SIGTERM)

        thread = threading.Thread(target=sender, name="worker", daemon=True)
        with rescue_after(WAIT_S) as rescued:
            thread.start()
            assert run_until_signal(service) == 0
        thread.join(WAIT_S)
        assert not rescued, "SIGTERM during the start was lost"
        assert service.start_cancelled and not service.ready.is_set()
        assert service.stops == 1


class HungReloadService(FakeService):
    """A reload that never ends on its own (a voice check that hangs)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def reload(self, load_settings: Callable[[], object] | None = None) -> str:
        self.reloads += 1
        self.reloaded.release()
        self.release.wait(3 * WAIT_S)
        return "reloaded"


@pytest.mark.parametrize("to_worker", [False, True])
def test_a_stop_during_a_reload_that_never_ends_stops_the_loop(to_worker: bool) -> None:
    service = HungReloadService()
    main = threading.main_thread().ident
    assert main is not None

    def sender() -> None:
        assert service.ready.wait(WAIT_S)
        from_worker(signal.SIGHUP)
        assert service.reloaded.acquire(timeout=WAIT_S)
        settle()
        if to_worker:
            from_worker(signal.SIGTERM)
        else:
            signal.pthread_kill(main, signal.SIGTERM)

    thread = threading.Thread(target=sender, name="worker", daemon=True)
    try:
        with rescue_after(WAIT_S) as rescued:
            thread.start()
            assert run_until_signal(service) == 0
        assert not rescued, "SIGTERM during a reload was held until the reload ended"
        assert service.reloads == 1 and service.stops == 1
    finally:
        service.release.set()
        thread.join(WAIT_S)


def test_a_failing_reload_is_raised_on_the_main_thread_and_still_stops() -> None:
    class Broken(FakeService):
        def reload(self, load_settings: Callable[[], object] | None = None) -> str:
            raise RuntimeError("settings exploded")

    service = Broken()

    def sender() -> None:
        assert service.ready.wait(WAIT_S)
        from_worker(signal.SIGHUP)

    thread = threading.Thread(target=sender, name="worker", daemon=True)
    with rescue_after(WAIT_S) as rescued, pytest.raises(RuntimeError, match="exploded"):
        thread.start()
        run_until_signal(service)
    thread.join(WAIT_S)
    assert not rescued and service.stops == 1
