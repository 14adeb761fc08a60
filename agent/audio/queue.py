"""The bounded play queue: highest priority first, first come first served within one.

A :class:`agent.bounded_queue.BoundedPriorityQueue` of :class:`~agent.audio.item.PlayItem` by
the item's priority, plus the refusals ``AudioPlayer.submit`` raises; thread-safe, each method
one atomic step. It holds ``maxsize`` items; an item more urgent than every queued one
overtakes a full queue (up to ``maxsize`` such items more), so an urgent announcement still
interrupts while a backlog waits. The synthesis worker asks :meth:`PlayQueue.wait_room` before
it submits, so the bound holds the worker back instead of failing requests. An item with a
synchronized start is *held* apart (neither popped nor seen by ``head``: it blocks and
interrupts nothing) until :meth:`PlayQueue.release_due` lets it in shortly before its time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.audio.item import PlayItem
from agent.bounded_queue import BoundedPriorityQueue, Full

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
        self._items: BoundedPriorityQueue[PlayItem] = BoundedPriorityQueue(
            maxsize, overtake=maxsize)
        self._maxsize = maxsize
        self._held_lock = threading.Lock()
        self._held: list[PlayItem] = []  # synchronized items before their release time

    def __len__(self) -> int:
        with self._held_lock:
            held = len(self._held)
        return len(self._items) + held

    def wait_room(self, priority: int, timeout: float) -> bool:
        """Whether :meth:`push` would take an item of ``priority``, waiting up to ``timeout``
        (0: not at all) for room."""
        return self._items.wait_room(priority, timeout)

    def push(self, item: PlayItem) -> None:
        """Queue ``item``; raises :class:`QueueFull` when the queue is at its limit. A
        synchronized item is held until :meth:`release_due` lets it in."""
        if item.sync is not None:
            with self._held_lock:
                if len(self._held) + len(self._items) >= self._maxsize:
                    raise QueueFull(f"play queue full ({self._maxsize} items); request "
                                    f"{item.request_id} rejected")
                self._held.append(item)
            return
        try:
            self._items.put(item, item.priority)
        except Full as exc:
            raise QueueFull(
                f"play queue full ({exc.maxsize} items); request {item.request_id} rejected"
            ) from None

    def pop(self) -> PlayItem | None:
        """The most urgent item, or None."""
        return self._items.pop()

    def head(self) -> PlayItem | None:
        """The item :meth:`pop` would return, left in place."""
        return self._items.head()

    def release_due(self, now: float, prepare_s: float) -> float | None:
        """Let in the held items whose start is less than ``prepare_s`` away; returns the
        seconds until the next held item is due (None: none is held)."""
        with self._held_lock:
            due = [i for i in self._held if i.sync is not None
                   and i.sync.release_at(prepare_s) <= now]
            self._held = [i for i in self._held if i not in due]
            waits = [i.sync.release_at(prepare_s) - now for i in self._held
                     if i.sync is not None]
        for item in sorted(due, key=lambda i: i.sync.at if i.sync is not None else 0.0):
            try:
                self._items.put(item, item.priority)
            except Full:  # a backlog filled the queue meanwhile: let it in once there is room
                with self._held_lock:
                    self._held.append(item)
                waits.append(0.05)
        return max(0.0, min(waits)) if waits else None

    def take_expired(self, now: float) -> list[PlayItem]:
        """Remove and return the items whose ``expires_at`` has passed."""
        return self._take_held(lambda item: item._expired(now)) + self._items.take(
            lambda item: item._expired(now))

    def take_all(self) -> list[PlayItem]:
        """Remove and return every queued item (held ones last), most urgent first."""
        return self._items.take_all() + self._take_held(lambda item: True)

    def _take_held(self, predicate: Callable[[PlayItem], bool]) -> list[PlayItem]:
        with self._held_lock:
            taken = [i for i in self._held if predicate(i)]
            self._held = [i for i in self._held if i not in taken]
        return taken
