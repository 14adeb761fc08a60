"""Liveness from progress, not from timers.

Each long-running worker keeps its own marks (``busy_since``, a progress counter, whether its
thread runs); :meth:`Liveness.check` turns them into a verdict: *hung* when busy on one item past
its ``stall_s`` (or idle without progress past its ``beat_timeout_s``), *dead* when its thread
exited. :class:`Watchdog` pings systemd only while every watched worker is alive. Design:
docs/internals.md#liveness.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.health.sdnotify import Notifier
from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.health.report import WorkerReport, WorkerState

__all__ = ["Liveness", "LivenessReport", "Watchdog", "WorkerStatus"]

log = get_logger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class WorkerStatus:
    """One worker's state at the time of a check. Durations in seconds."""

    name: str
    state: WorkerState
    busy_s: float | None
    """How long the current item has been running; ``None`` when idle."""
    since_beat_s: float
    """Time since a check last saw the worker make progress."""
    problem: str | None = None
    """Why the worker counts as hung or dead."""

    def as_dict(self) -> WorkerReport:
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

    def as_dict(self) -> dict[str, WorkerReport]:
        return {name: status.as_dict() for name, status in self.workers.items()}


class _Watched:
    """A worker whose marks are read from its component when checked (:meth:`Liveness.watch`).

    A change of ``progress`` counts as a beat; ``alive`` returning False *after* it was once
    True means the worker's thread has died (before that, it has not started yet). Only the
    checking threads touch the fields here (under the GIL; a race between two checks can at
    worst see one beat late).
    """

    __slots__ = ("_alive", "_busy_since", "_last_beat", "_last_progress", "_progress",
                 "_seen_alive", "beat_timeout_s", "name", "stall_s")

    def __init__(self, name: str, *, stall_s: float, beat_timeout_s: float | None,
                 busy_since: Callable[[], float | None], alive: Callable[[], bool] | None,
                 progress: Callable[[], int] | None, now: float) -> None:
        self.name = name
        self.stall_s = stall_s
        self.beat_timeout_s = beat_timeout_s
        self._busy_since = busy_since
        self._alive = alive
        self._progress = progress
        self._last_progress: int | None = None
        self._last_beat = now
        self._seen_alive = False

    def _beat(self, now: float) -> float:
        """Record progress seen now; the time since the last progress."""
        if self._progress is None:
            self._last_beat = now  # no counter: only the busy stamp can tell
        else:
            count = self._progress()
            if count != self._last_progress:
                self._last_progress = count
                self._last_beat = now
        return max(0.0, now - self._last_beat)

    def status(self, now: float) -> WorkerStatus:
        """This worker's state at monotonic time ``now``. Any thread."""
        since_beat = self._beat(now)
        if self._alive is not None:
            if self._alive():
                self._seen_alive = True
            elif self._seen_alive:
                return WorkerStatus(self.name, "dead", None, since_beat, "its thread has exited")
        busy_since = self._busy_since()
        if busy_since is not None:
            busy_s = max(0.0, now - busy_since)
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


class Liveness:
    """The registry of watched workers. ``stall_s`` is the default busy limit
    (``health.stall_s``). ``clock`` is injectable for tests; it must be monotonic.

    Any thread may watch, clear and check.
    """

    def __init__(self, stall_s: float, *, clock: Clock = time.monotonic) -> None:
        self.stall_s = stall_s
        self._clock = clock
        self._lock = threading.Lock()
        self._workers: dict[str, _Watched] = {}

    def watch(
        self,
        name: str,
        *,
        busy_since: Callable[[], float | None],
        alive: Callable[[], bool] | None = None,
        progress: Callable[[], int] | None = None,
        stall_s: float | None = None,
        beat_timeout_s: float | None = None,
    ) -> None:
        """Watch a worker called ``name`` (unique) through the marks its component keeps.

        ``busy_since()``: ``time.monotonic()`` when the current item began, ``None`` when
        idle. ``stall_s``: longest time on one item (default the registry's).
        ``progress()``: a counter its loop increments on every turn (needed for
        ``beat_timeout_s``, the longest time idle without progress; leave both out for a
        worker that blocks on a queue without timeout); a change counts as a beat when a
        check sees it, so checks must come more often than ``beat_timeout_s`` (the
        watchdog's do). ``alive()``: whether its thread runs. The callables run on the
        checking thread and must only read.
        """
        if beat_timeout_s is not None and progress is None:
            raise ValueError("beat_timeout_s needs a progress counter to watch")
        worker = _Watched(name, stall_s=self.stall_s if stall_s is None else stall_s,
                          beat_timeout_s=beat_timeout_s, busy_since=busy_since, alive=alive,
                          progress=progress, now=self._clock())
        with self._lock:
            if name in self._workers:
                raise ValueError(f"a worker called {name!r} is already registered")
            self._workers[name] = worker

    def clear(self) -> None:
        """Stop watching every worker (at shutdown, before the workers are stopped, so the
        watchdog keeps pinging while the agent winds down)."""
        with self._lock:
            self._workers.clear()

    def check(self) -> LivenessReport:
        """Every watched worker's state now."""
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
