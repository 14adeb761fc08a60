"""Publishes the health snapshot: every ``health.interval_s``, at once when the overall state
changes (checked every ``health.state_check_s``), and whenever :meth:`request` asks.

Each publication hands the snapshot to ``publish`` (the daemon sends it retained to
``{prefix}/{device_id}/health``) and, when ``health.prometheus_file`` is set, rewrites the
Prometheus textfile, which :meth:`HealthReporter.stop` deletes (a clean stop). Whenever the
one-line summary changes it goes to systemd as ``STATUS=``.

Threads: one thread of its own (``health-reporter``) takes the snapshots and calls
``publish``; ``publish`` must not block for long (the MQTT client only queues).
:meth:`request`, :meth:`start` and :meth:`stop` may be called from any thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agent.health.prometheus import remove_textfile, render, write_textfile
from agent.health.sdnotify import Notifier
from agent.health.snapshot import Health, summary_line
from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.health.report import HealthReport, State

__all__ = ["HealthReporter"]

log = get_logger(__name__)

Publish = Callable[["HealthReport"], None]


class HealthReporter:
    """See the module docstring. ``publish`` and ``notifier`` are optional (tests, no MQTT)."""

    def __init__(
        self,
        health: Health,
        *,
        publish: Publish | None = None,
        notifier: Notifier | None = None,
        prometheus_file: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.health = health
        self._publish = publish
        self._notifier = notifier
        self.prometheus_file = prometheus_file or health.settings.prometheus_file
        self._clock = clock
        self._interval_s = health.settings.interval_s
        self._check_s = min(health.settings.state_check_s, self._interval_s)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._file_lock = threading.Lock()
        self._file_removed = False
        self._thread: threading.Thread | None = None
        self._status: str | None = None
        self.state: State | None = None
        """The overall state of the latest snapshot (``None`` before the first)."""
        self.published = 0
        """Snapshots handed to ``publish`` so far."""

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("health reporter already started")
        self._thread = threading.Thread(target=self._run, name="health-reporter", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Publish a fresh snapshot as soon as possible (after a reload, on ``ping``)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reporting and delete the Prometheus textfile: a stopped agent has no figures
        (one killed leaves its file, whose ``last_write_timestamp_seconds`` then ages)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.prometheus_file is not None:
            with self._file_lock:  # a write still under way finishes first; none follows
                self._file_removed = True
                try:
                    remove_textfile(self.prometheus_file)
                except OSError as exc:
                    log.warning("health_textfile_not_removed", path=str(self.prometheus_file),
                                error=str(exc))

    def report(self, *, force: bool) -> HealthReport:
        """Take a snapshot; publish it when forced, due or the state changed. Runs on the
        reporter thread (or the caller's, for a synchronous report)."""
        snap = self.health.snapshot()
        previous, self.state = self.state, snap["state"]
        if previous is not None and previous != snap["state"]:
            emit = log.info if snap["state"] == "ok" else log.warning
            emit("health_state_changed", state=snap["state"], previous=previous,
                 reasons=snap["reasons"])
        if force or previous != snap["state"]:
            self._emit(snap)
        line = summary_line(snap)
        if line != self._status and self._notifier is not None:
            self._notifier.status(line)
            self._status = line
        return snap

    def _emit(self, snap: HealthReport) -> None:
        if self._publish is not None:
            try:
                self._publish(snap)
                self.published += 1
            except Exception as exc:
                log.warning("health_publish_failed", error=repr(exc)[:200])
        if self.prometheus_file is not None:
            with self._file_lock:
                if self._file_removed:
                    return
                try:
                    write_textfile(self.prometheus_file, render(snap))
                except OSError as exc:
                    log.warning("health_textfile_failed", path=str(self.prometheus_file),
                                error=str(exc))

    def _run(self) -> None:
        """Reporter thread: snapshot every ``state_check_s``, publish when due or changed."""
        next_due = self._clock()
        while not self._stop.is_set():
            requested = self._wake.is_set()
            if requested:  # a request arriving after this point wakes the next wait
                self._wake.clear()
            now = self._clock()
            due = requested or now >= next_due
            try:
                self.report(force=due)
            except Exception:
                log.exception("health_report_failed")
            if due:
                next_due = now + self._interval_s
            self._wake.wait(max(0.0, min(self._check_s, next_due - self._clock())))
