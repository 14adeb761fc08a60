"""The bounded play queue: highest priority first, first come first served within one.

Thread-safe; every method is one atomic step under the queue's lock.
"""

from __future__ import annotations

import bisect
import itertools
import threading

from agent.audio.item import PlayItem

__all__ = ["PlayQueue", "PlayerClosed", "QueueFull", "SubmitError"]


class SubmitError(Exception):
    """``AudioPlayer.submit`` refused the item; the message says why."""


class QueueFull(SubmitError):
    """The play queue holds ``queue_max`` items already; the request was not queued."""


class PlayerClosed(SubmitError):
    """The player is not running (not started yet, or closed)."""


class PlayQueue:
    """Items waiting to play, ordered by (priority descending, submission order)."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._lock = threading.Lock()
        self._entries: list[tuple[int, int, PlayItem]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def push(self, item: PlayItem) -> None:
        """Queue ``item``; raises :class:`QueueFull` when the queue is at its limit."""
        with self._lock:
            if len(self._entries) >= self._maxsize:
                raise QueueFull(
                    f"play queue full ({self._maxsize} items); request {item.request_id} rejected"
                )
            bisect.insort(self._entries, (-item.priority, next(self._seq), item),
                          key=lambda entry: entry[:2])

    def pop(self) -> PlayItem | None:
        """The most urgent item, or None."""
        with self._lock:
            return self._entries.pop(0)[2] if self._entries else None

    def head(self) -> PlayItem | None:
        """The item :meth:`pop` would return, left in place."""
        with self._lock:
            return self._entries[0][2] if self._entries else None

    def take_expired(self, now: float) -> list[PlayItem]:
        """Remove and return the items whose ``expires_at`` has passed."""
        with self._lock:
            expired = [entry[2] for entry in self._entries if entry[2]._expired(now)]
            if expired:
                self._entries = [e for e in self._entries if not e[2]._expired(now)]
            return expired

    def take_all(self) -> list[PlayItem]:
        """Remove and return every queued item, most urgent first."""
        with self._lock:
            items = [entry[2] for entry in self._entries]
            self._entries.clear()
            return items
