"""A bounded, thread-safe priority queue: most urgent first, first come first served within one.

One implementation behind the speak job queue (:class:`agent.pipeline.jobs.JobQueue`) and the play
queue (:class:`agent.audio.queue.PlayQueue`). A leaf module (standard library only); every method
is one atomic step under the queue's lock, from any thread. Backpressure and ``overtake``:
docs/internals.md#the-bounded-priority-queue.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["BoundedPriorityQueue", "Full"]

T = TypeVar("T")


def _order(entry: tuple[int, int, object]) -> tuple[int, int]:
    """Queue order of a heap entry: priority descending, then arrival."""
    return entry[0], entry[1]


class Full(Exception):
    """The queue holds ``maxsize`` items already; the item was not queued."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(f"queue full ({maxsize} items)")
        self.maxsize = maxsize


class BoundedPriorityQueue(Generic[T]):
    """At most ``maxsize`` items, taken in order of priority (higher first), then of arrival.

    ``overtake`` (default 0): how many items beyond ``maxsize`` may still be put, each only
    when it is more urgent than every item queued (see the module docstring).

    :meth:`close` wakes every waiter for good: a closed queue still hands out what it holds
    and still accepts items, but waits no longer.
    """

    def __init__(self, maxsize: int, *, overtake: int = 0) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        if overtake < 0:
            raise ValueError("overtake must not be negative")
        self.maxsize = maxsize
        self.overtake = overtake
        self._cond = threading.Condition()
        self._heap: list[tuple[int, int, T]] = []  # (-priority, arrival, item)
        self._arrival = itertools.count()
        self._closed = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def put(self, item: T, priority: int) -> int:
        """Queue ``item``; returns how many queued items are ahead of it. Raises :class:`Full`
        when :meth:`room_for` says there is no room for ``priority``."""
        with self._cond:
            if not self._fits(priority):
                raise Full(self.maxsize)
            ahead = sum(1 for entry in self._heap if -entry[0] >= priority)
            heapq.heappush(self._heap, (-priority, next(self._arrival), item))
            self._cond.notify_all()
            return ahead

    def room_for(self, priority: int) -> bool:
        """Whether an item of ``priority`` would be queued now: fewer than ``maxsize`` items
        wait, or it is more urgent than all of them and fewer than ``maxsize + overtake`` do.
        A less urgent item never fits where a more urgent one does not."""
        with self._cond:
            return self._fits(priority)

    def wait_room(self, priority: int, timeout: float | None) -> bool:
        """Wait up to ``timeout`` (None: for good) until :meth:`room_for` ``priority`` holds or
        the queue is closed; returns whether there is room."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._fits(priority), timeout)
            return self._fits(priority)

    def _fits(self, priority: int) -> bool:  # under the lock
        if len(self._heap) < self.maxsize:
            return True
        return (len(self._heap) < self.maxsize + self.overtake
                and priority > -self._heap[0][0])

    def pop(self, timeout: float | None = 0.0) -> T | None:
        """The most urgent item; waits up to ``timeout`` (None: until one comes or
        :meth:`close`). None when there was none."""
        return self.pop_above(None, timeout)

    def pop_above(self, priority: int | None, timeout: float | None = 0.0, *,
                  admit: Callable[[int], bool] | None = None) -> T | None:
        """The most urgent item if its priority is above ``priority`` (any item when None)
        and ``admit`` (when given) accepts that priority.

        Waits up to ``timeout`` (None: until one comes or :meth:`close`) for such an item; the
        wait ends early only when an item is put, so a caller whose ``admit`` depends on
        something else waits on that instead. ``admit`` runs under the queue's lock: it must
        be quick and must not touch this queue.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._heap and (priority is None or -self._heap[0][0] > priority) and (
                        admit is None or admit(-self._heap[0][0])):
                    return self._pop_head()
                if self._closed:
                    return None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def _pop_head(self) -> T:  # under the lock; wakes wait_room
        item = heapq.heappop(self._heap)[2]
        self._cond.notify_all()
        return item

    def head(self) -> T | None:
        """The item :meth:`pop` would return, left in place."""
        with self._cond:
            return self._heap[0][2] if self._heap else None

    def take(self, predicate: Callable[[T], bool]) -> list[T]:
        """Remove and return the items ``predicate`` holds for, most urgent first.

        ``predicate`` runs under the queue's lock: it must be quick and must not touch
        the queue.
        """
        with self._cond:
            taken: list[tuple[int, int, T]] = []
            kept: list[tuple[int, int, T]] = []
            for entry in self._heap:
                (taken if predicate(entry[2]) else kept).append(entry)
            if taken:
                self._heap = kept
                heapq.heapify(self._heap)
                self._cond.notify_all()
            return [entry[2] for entry in sorted(taken, key=_order)]

    def take_all(self) -> list[T]:
        """Remove and return every queued item, most urgent first."""
        with self._cond:
            items = [entry[2] for entry in sorted(self._heap, key=_order)]
            self._heap.clear()
            self._cond.notify_all()
            return items

    def close(self) -> None:
        """Wake every waiter for good (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
