"""The bounded play queue: highest priority first, first come first served within one.

A :class:`agent.bounded_queue.BoundedPriorityQueue` of :class:`~agent.audio.item.PlayItem`
keyed by the item's own priority, plus the refusals :meth:`AudioPlayer.submit
<agent.audio.player.AudioPlayer.submit>` raises. Thread-safe; every method is one atomic step
under the queue's lock.

It holds ``maxsize`` items; an item more urgent than every queued one overtakes a full queue
(up to ``maxsize`` such items more), so an urgent announcement still interrupts while a
backlog waits. The synthesis worker asks :meth:`PlayQueue.wait_room` before it submits, so the
bound holds the worker back instead of failing requests.
"""

from __future__ import annotations

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

    def __len__(self) -> int:
        return len(self._items)

    def wait_room(self, priority: int, timeout: float) -> bool:
        """Whether :meth:`push` would take an item of ``priority``, waiting up to ``timeout``
        (0: not at all) for room."""
        return self._items.wait_room(priority, timeout)

    def push(self, item: PlayItem) -> None:
        """Queue ``item``; raises :class:`QueueFull` when the queue is at its limit."""
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

    def take_expired(self, now: float) -> list[PlayItem]:
        """Remove and return the items whose ``expires_at`` has passed."""
        return self._items.take(lambda item: item._expired(now))

    def take_all(self) -> list[PlayItem]:
        """Remove and return every queued item, most urgent first."""
        return self._items.take_all()
