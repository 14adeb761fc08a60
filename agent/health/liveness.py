"""Liveness from progress, not from timers.

Each long-running worker (synthesis, audio, the MQTT loop) registers once and then reports
what it does through a :class:`Worker` handle:

- ``busy()`` when it takes an item (or makes progress on it, e.g. per sentence);
- ``idle()`` when it finishes and goes back to waiting;
- ``beat()`` on every turn of its loop, including waits that time out.

Each call is one ``time.monotonic()`` and one attribute store: free on the hot path.
A component that already keeps such marks (``busy_since`` on the monotonic clock, a step
counter, an ``alive`` flag) can be watched without calls of its own: :meth:`Liveness.watch`.
:meth:`Liveness.check` turns the marks into a verdict. A worker is *hung* when it has been
busy on one item longer than its ``stall_s``, or (if it declared a ``beat_timeout_s``) idle
without a beat for longer than that, and *dead* when its thread has exited.

:class:`Watchdog` pings systemd (``WATCHDOG=1``) at half the watchdog interval, but only
while every registered worker is alive, so a hung worker lets the watchdog expire and
systemd restarts the service.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.health.sdnotify import Notifier
from agent.logs import get_logger

__all__ = ["Liveness", "LivenessReport", "Watchdog", "Worker", "WorkerStatus"]

log = get_logger(__name__)

Clock = Callable[[], float]
WorkerState = Literal["idle", "busy", "hung", "dead"]


@dataclass(frozen=True)
class WorkerStatus:
    """One worker's state at the time of a check. Durations in seconds."""

    name: str
    state: WorkerState
    busy_s: float | None
    """How long the current item has been running; ``None`` when idle."""
    since_beat_s: float
    """Time since the worker last reported anything (busy, idle or beat)."""
    problem: str | None = None
    """Why the worker counts as hung or dead."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "busy_s": None if self.busy_s is None else round(self.busy_s, 3),
            "since_beat_s": round(self.since_beat_s, 3),
            "problem": self.problem,
        }


@dataclass(frozen=True)
class LivenessReport:
    """The result of :meth:`Liveness.check`."""

    workers: dict[str, WorkerStatus] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        """Every worker is idle or busy within its limit."""
        return not self.problems

    @property
    def problems(self) -> list[str]:
        """One line per hung or dead worker."""
        return [f"worker {s.name} {s.state}: {s.problem}"
                for s in self.workers.values() if s.problem is not None]

    def as_dict(self) -> dict[str, Any]:
        return {name: status.as_dict() for name, status in self.workers.items()}


class Worker:
    """The handle a worker thread reports through. See the module docstring.

    ``busy``/``idle``/``beat`` are called by the worker's own thread; the fields they set
    are read by whichever thread runs :meth:`Liveness.check` (single stores of a float or
    ``None`` are atomic under the GIL, no lock needed).
    """

    __slots__ = ("_busy_since", "_clock", "_last_beat", "_registry", "beat_timeout_s",
                 "name", "stall_s", "thread")

    def __init__(self, registry: Liveness, name: str, *, stall_s: float,
                 beat_timeout_s: float | None, thread: threading.Thread | None,
                 clock: Clock) -> None:
        self._registry = registry
        self.name = name
        self.stall_s = stall_s
        self.beat_timeout_s = beat_timeout_s
        self.thread = thread
        self._clock = clock
        self._busy_since: float | None = None
        self._last_beat = clock()

    def busy(self) -> None:
        """Started an item, or made progress on it: the stall clock starts again."""
        now = self._clock()
        self._busy_since = now
        self._last_beat = now

    def idle(self) -> None:
        """Finished the item; waiting for the next one."""
        self._last_beat = self._clock()
        self._busy_since = None

    def beat(self) -> None:
        """The loop turned (e.g. a queue wait timed out); does not change busy/idle."""
        self._last_beat = self._clock()

    @contextmanager
    def working(self) -> Iterator[None]:
        """``with worker.working(): ...``: busy for the block, idle after (even on error)."""
        self.busy()
        try:
            yield
        finally:
            self.idle()

    def close(self) -> None:
        """Stop watching this worker (it is shutting down on purpose)."""
        self._registry.unregister(self)

    def status(self, now: float) -> WorkerStatus:
        """This worker's state at monotonic time ``now``. Any thread."""
        busy_since = self._busy_since
        since_beat = max(0.0, now - self._last_beat)
        busy_s = None if busy_since is None else max(0.0, now - busy_since)
        thread = self.thread
        if thread is not None and thread.ident is not None and not thread.is_alive():
            return WorkerStatus(self.name, "dead", busy_s, since_beat,
                                f"thread {thread.name} has exited")
        if busy_s is not None:
            if busy_s > self.stall_s:
                return WorkerStatus(self.name, "hung", busy_s, since_beat,
                                    f"busy on one item for {busy_s:.0f} s "
                                    f"(limit {self.stall_s:g} s)")
            return WorkerStatus(self.name, "busy", busy_s, since_beat)
        if self.beat_timeout_s is not None and since_beat > self.beat_timeout_s:
            return WorkerStatus(self.name, "hung", None, since_beat,
                                f"no heartbeat for {since_beat:.0f} s "
                                f"(limit {self.beat_timeout_s:g} s)")
        return WorkerStatus(self.name, "idle", None, since_beat)


class _Probe(Worker):
    """A worker whose marks are read from its component when checked (:meth:`Liveness.watch`).

    ``busy_since`` is read as the component's own ``time.monotonic()`` stamp; a change of
    ``progress`` counts as a beat; ``alive`` returning False *after* it was once True means
    the worker's thread has died (before that, it has not started yet).
    """

    __slots__ = ("_alive", "_busy_fn", "_last_progress", "_progress", "_seen_alive")

    def __init__(self, registry: Liveness, name: str, *, stall_s: float,
                 beat_timeout_s: float | None, clock: Clock,
                 busy_since: Callable[[], float | None], alive: Callable[[], bool] | None,
                 progress: Callable[[], int] | None) -> None:
        super().__init__(registry, name, stall_s=stall_s, beat_timeout_s=beat_timeout_s,
                         thread=None, clock=clock)
        self._busy_fn = busy_since
        self._alive = alive
        self._progress = progress
        self._last_progress: int | None = None
        self._seen_alive = False

    def status(self, now: float) -> WorkerStatus:
        if self._progress is not None:
            count = self._progress()
            if count != self._last_progress:
                self._last_progress = count
                self._last_beat = now
        else:
            self._last_beat = now  # no counter: only the busy stamp can tell
        if self._alive is not None:
            alive = self._alive()
            if alive:
                self._seen_alive = True
            elif self._seen_alive:
                return WorkerStatus(self.name, "dead", None, max(0.0, now - self._last_beat),
                                    "its thread has exited")
        self._busy_since = self._busy_fn()
        return super().status(now)


class Liveness:
    """The registry of watched workers. ``stall_s`` is the default busy limit
    (``health.stall_s``). ``clock`` is injectable for tests; it must be monotonic.

    Any thread may register, unregister and check.
    """

    def __init__(self, stall_s: float, *, clock: Clock = time.monotonic) -> None:
        self.stall_s = stall_s
        self._clock = clock
        self._lock = threading.Lock()
        self._workers: dict[str, Worker] = {}

    def register(
        self,
        name: str,
        *,
        stall_s: float | None = None,
        beat_timeout_s: float | None = None,
        thread: threading.Thread | None = None,
    ) -> Worker:
        """Watch a worker called ``name`` (unique); it starts out idle.

        ``stall_s``: longest time on one item (default the registry's). ``beat_timeout_s``:
        longest time idle without a ``beat()``; only for loops that wake up regularly (leave
        ``None`` for a worker that blocks on a queue without timeout). ``thread``: the
        worker's thread; once it has started and then exited, the worker is dead.
        """
        worker = Worker(self, name, stall_s=self.stall_s if stall_s is None else stall_s,
                        beat_timeout_s=beat_timeout_s, thread=thread, clock=self._clock)
        self._add(worker)
        return worker

    def _add(self, worker: Worker) -> None:
        with self._lock:
            if worker.name in self._workers:
                raise ValueError(f"a worker called {worker.name!r} is already registered")
            self._workers[worker.name] = worker

    def watch(
        self,
        name: str,
        *,
        busy_since: Callable[[], float | None],
        alive: Callable[[], bool] | None = None,
        progress: Callable[[], int] | None = None,
        stall_s: float | None = None,
        beat_timeout_s: float | None = None,
    ) -> Worker:
        """Watch a component that keeps its own marks; same rules as :meth:`register`.

        ``busy_since()``: ``time.monotonic()`` when the current item began, ``None`` when
        idle. ``progress()``: a counter its loop increments on every turn (needed for
        ``beat_timeout_s``); a change counts as a beat when a check sees it, so checks must
        come more often than ``beat_timeout_s`` (the watchdog's do). ``alive()``: whether its
        thread runs. The callables run on the checking thread and must only read.
        """
        if beat_timeout_s is not None and progress is None:
            raise ValueError("beat_timeout_s needs a progress counter to watch")
        worker = _Probe(self, name, stall_s=self.stall_s if stall_s is None else stall_s,
                        beat_timeout_s=beat_timeout_s, clock=self._clock,
                        busy_since=busy_since, alive=alive, progress=progress)
        self._add(worker)
        return worker

    def clear(self) -> None:
        """Stop watching every worker (at shutdown, before the workers are stopped, so the
        watchdog keeps pinging while the agent winds down)."""
        with self._lock:
            self._workers.clear()

    def unregister(self, worker: Worker) -> None:
        with self._lock:
            if self._workers.get(worker.name) is worker:
                del self._workers[worker.name]

    def names(self) -> list[str]:
        with self._lock:
            return list(self._workers)

    def check(self) -> LivenessReport:
        """Every registered worker's state now."""
        now = self._clock()
        with self._lock:
            workers = list(self._workers.values())
        return LivenessReport({w.name: w.status(now) for w in workers})


class Watchdog:
    """Sends ``WATCHDOG=1`` every ``interval_s / 2`` while :meth:`Liveness.check` is alive.

    ``interval_s`` defaults to the notifier's ``$WATCHDOG_USEC``; without one (not under
    systemd, or no ``WatchdogSec=``) :meth:`start` does nothing. The pings run on a thread
    of their own (``sd-watchdog``), so they stop exactly when the *workers* stop making
    progress, not when some unrelated thread is slow.
    """

    def __init__(self, liveness: Liveness, notifier: Notifier, *,
                 interval_s: float | None = None) -> None:
        self._liveness = liveness
        self._notifier = notifier
        self.interval_s = notifier.watchdog_interval_s() if interval_s is None else interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0
        """Pings sent so far (read by tests and health)."""
        self.withheld = 0
        """Ticks on which a ping was due but withheld because a worker was not alive."""

    @property
    def active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Start pinging; ``False`` (and no thread) when no watchdog is configured."""
        if self.interval_s is None or not self._notifier.enabled:
            return False
        if self._thread is not None:
            raise RuntimeError("watchdog already started")
        self._thread = threading.Thread(target=self._run, args=(self.interval_s / 2,),
                                        name="sd-watchdog", daemon=True)
        self._thread.start()
        log.info("watchdog_started", interval_s=self.interval_s)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Stop pinging (call at shutdown, after ``STOPPING=1``). Any thread but its own."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, period: float) -> None:
        """Watchdog thread: check, ping or withhold, wait ``period``, repeat."""
        withholding = False
        while not self._stop.is_set():
            report = self._liveness.check()
            if report.alive:
                if withholding:
                    log.warning("watchdog_resumed")
                    withholding = False
                self._notifier.watchdog()
                self.sent += 1
            else:
                if not withholding:
                    log.error("watchdog_withheld", problems=report.problems)
                    withholding = True
                self.withheld += 1
            self._stop.wait(period)
