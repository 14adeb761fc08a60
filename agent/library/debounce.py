"""The part the model and lexicon watchers share: a watchdog observer and a debounce thread.

watchdog's inotify observer (or the polling observer, for filesystems without inotify) only marks
the watcher dirty, for the events its ``wanted`` test keeps; the debounce thread calls
:meth:`DebouncedWatcher._fire` once nothing has changed for ``debounce_s``, and again after another
quiet period while ``_fire`` asks for that. Used by :class:`agent.library.watch.ModelWatcher` and
:class:`agent.library.lexicon.LexiconWatcher`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DebouncedWatcher"]


class DebouncedWatcher:
    """An observer thread that marks dirty and a debounce thread that calls :meth:`_fire`."""

    def __init__(self, *, name: str, debounce_s: float, polling: bool,
                 poll_interval_s: float) -> None:
        self.debounce_s = debounce_s
        self.polling = polling
        self.poll_interval_s = poll_interval_s
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._last_event = time.monotonic()
        self._observer: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.beat = time.monotonic()
        """Last time the debounce loop ran (liveness)."""

    def _observe(self, directory: Path, *, recursive: bool,
                 wanted: Callable[[tuple[str, str]], bool]) -> None:
        """Start watching ``directory`` (raises when it is missing) and the debounce thread;
        ``wanted`` gets an event's source and destination paths ("" for none)."""
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        watcher = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                # Observer thread: only mark dirty.
                if event.event_type in ("opened", "closed_no_write"):
                    return
                if wanted((str(event.src_path), str(getattr(event, "dest_path", "") or ""))):
                    watcher.notify()

        observer = (PollingObserver(timeout=self.poll_interval_s) if self.polling
                    else Observer())
        observer.schedule(_Handler(), str(directory), recursive=recursive)
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._thread.start()

    def notify(self) -> None:
        """Something watched changed (any thread)."""
        self._last_event = time.monotonic()
        self._dirty.set()

    def _fire(self) -> bool:
        """Act on the changes (debounce thread, must not raise); True: again after quiet."""
        raise NotImplementedError

    def _run(self) -> None:
        # Debounce thread: waits for quiet, then fires; again while _fire asks for it.
        while not self._stop.is_set():
            self.beat = time.monotonic()
            if not self._dirty.wait(timeout=1.0):
                continue
            quiet_for = time.monotonic() - self._last_event
            if quiet_for < self.debounce_s:
                self._stop.wait(self.debounce_s - quiet_for)
                continue
            self._dirty.clear()
            if self._fire():
                self.notify()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
        if self._thread.is_alive():
            self._thread.join(timeout)
