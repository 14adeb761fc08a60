"""Watch the models directory and ask the voice library to reload when files change.

watchdog's inotify observer (or the polling observer, for filesystems without inotify) watches the
whole models tree recursively, so atomic renames (``moved``), ``current`` symlink swaps, in-place
copies and new version directories are all seen. Events only mark the tree dirty; a debounce thread
calls :meth:`VoiceLibrary.reload` once the tree has been quiet for ``debounce_s``, and again while
the library reports a bundle as still being written. Temporary files of editors, rsync and
updaters are ignored.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from agent.library.voices import VoiceLibrary
from agent.logs import get_logger

__all__ = ["ModelWatcher", "is_temporary"]

log = get_logger(__name__)

_TEMP = re.compile(r"(^\.|~$|\.(tmp|part|partial|swp|swx|crdownload|download)$|^#.*#$)")


def is_temporary(path: str) -> bool:
    """True for files that are never part of a bundle: dotfiles (rsync's ``.name.XXXX``), ``~``
    backups, ``*.tmp``/``*.part`` downloads, editor swap files."""
    return bool(_TEMP.search(Path(path).name))


class ModelWatcher:
    """Runs an observer thread (watchdog) and a debounce thread that triggers reloads."""

    def __init__(self, library: VoiceLibrary, *, debounce_s: float = 1.0, polling: bool = False,
                 poll_interval_s: float = 1.0) -> None:
        self.library = library
        self.debounce_s = debounce_s
        self.polling = polling
        self.poll_interval_s = poll_interval_s
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._last_event = time.monotonic()
        self._observer: Any = None
        self._thread = threading.Thread(target=self._run, name="model-watch", daemon=True)
        self.reloads = 0
        self.beat = time.monotonic()
        """Last time the debounce loop ran (liveness)."""

    def start(self) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        watcher = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                # Observer thread: only mark dirty.
                if event.event_type in ("opened", "closed_no_write"):
                    return
                paths = [str(event.src_path), str(getattr(event, "dest_path", "") or "")]
                if all(not p or is_temporary(p) for p in paths):
                    return
                watcher.notify()

        models_dir = self.library.models_dir
        models_dir.mkdir(parents=True, exist_ok=True)
        observer = (PollingObserver(timeout=self.poll_interval_s) if self.polling
                    else Observer())
        observer.schedule(_Handler(), str(models_dir), recursive=True)
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._thread.start()
        log.info("model_watch_started", dir=str(models_dir),
                 observer="polling" if self.polling else "inotify")

    def notify(self) -> None:
        """Something in the models tree changed (any thread)."""
        self._last_event = time.monotonic()
        self._dirty.set()

    def _run(self) -> None:
        # Debounce thread: waits for quiet, then reloads; retries while bundles are pending.
        while not self._stop.is_set():
            self.beat = time.monotonic()
            if not self._dirty.wait(timeout=1.0):
                continue
            quiet_for = time.monotonic() - self._last_event
            if quiet_for < self.debounce_s:
                self._stop.wait(self.debounce_s - quiet_for)
                continue
            self._dirty.clear()
            try:
                results = self.library.reload()
            except Exception:
                log.exception("model_reload_crashed")
                continue
            self.reloads += 1
            if any(r.outcome == "pending" for r in results):
                self._last_event = time.monotonic()
                self._dirty.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
        if self._thread.is_alive():
            self._thread.join(timeout)
