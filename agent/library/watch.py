"""Watch the models directory and ask the voice library to reload when files change.

watchdog's inotify observer (or the polling observer, for filesystems without inotify) watches the
whole models tree recursively, so atomic renames (``moved``), ``current`` symlink swaps, in-place
copies and new version directories are all seen. Events only mark the tree dirty; a debounce thread
(:mod:`agent.library.debounce`) calls :meth:`VoiceLibrary.reload` once the tree has been quiet for
``debounce_s``, and again while the library reports a bundle as still being written.
Temporary files of editors, rsync and updaters are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.library.debounce import DebouncedWatcher
from agent.library.voices import VoiceLibrary
from agent.logs import get_logger

__all__ = ["ModelWatcher", "is_temporary"]

log = get_logger(__name__)

_TEMP = re.compile(r"(^\.|~$|\.(tmp|part|partial|swp|swx|crdownload|download)$|^#.*#$)")


def is_temporary(path: str) -> bool:
    """True for files that are never part of a bundle: dotfiles (rsync's ``.name.XXXX``), ``~``
    backups, ``*.tmp``/``*.part`` downloads, editor swap files."""
    return bool(_TEMP.search(Path(path).name))


class ModelWatcher(DebouncedWatcher):
    """Runs an observer thread (watchdog) and a debounce thread that triggers reloads."""

    def __init__(self, library: VoiceLibrary, *, debounce_s: float = 1.0, polling: bool = False,
                 poll_interval_s: float = 1.0) -> None:
        super().__init__(name="model-watch", debounce_s=debounce_s, polling=polling,
                         poll_interval_s=poll_interval_s)
        self.library = library
        self.reloads = 0

    def start(self) -> None:
        models_dir = self.library.models_dir
        models_dir.mkdir(parents=True, exist_ok=True)
        self._observe(models_dir, recursive=True,
                      wanted=lambda paths: any(p and not is_temporary(p) for p in paths))
        log.info("model_watch_started", dir=str(models_dir),
                 observer="polling" if self.polling else "inotify")

    def _fire(self) -> bool:
        # Reloads; again after quiet while a bundle is still being written.
        try:
            results = self.library.reload()
        except Exception:
            log.exception("model_reload_crashed")
            return False
        self.reloads += 1
        return any(r.outcome == "pending" for r in results)
