"""A bounded, thread-safe priority queue: most urgent first, first come first served within one.

One implementation behind the speak job queue (:class:`agent.pipeline.jobs.JobQueue`) and the
play queue (:class:`agent.audio.queue.PlayQueue`). Those wrap it to name their items and to
turn :class:`Full` into the refusal their callers report.

A leaf module: it imports only the standard library. Every method is one atomic step under
the queue's lock and may be called from any thread.
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

    :meth:`close` wakes every waiter for good: a closed queue still hands out what it holds
    and still accepts items, but waits no longer.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
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
        """Queue ``item``; returns how many queued items are ahead of it. Raises :class:`Full`."""
        with self._cond:
            if len(self._heap) >= self.maxsize:
                raise Full(self.maxsize)
            ahead = sum(1 for entry in self._heap if -entry[0] >= priority)
            heapq.heappush(self._heap, (-priority, next(self._arrival), item))
            self._cond.notify_all()
            return ahead

    def pop(self, timeout: float | None = 0.0) -> T | None:
        """The most urgent item; waits up to ``timeout`` (None: until one comes or
        :meth:`close`). None when there was none."""
        return self.pop_above(None, timeout)

    def pop_above(self, priority: int | None, timeout: float | None = 0.0) -> T | None:
        """The most urgent item if its priority is above ``priority`` (any item when None).

        Waits up to ``timeout`` (None: until one comes or :meth:`close`) for such an item.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._heap and (priority is None or -self._heap[0][0] > priority):
                    return heapq.heappop(self._heap)[2]
                if self._closed:
                    return None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)

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
            return [entry[2] for entry in sorted(taken, key=_order)]

    def take_all(self) -> list[T]:
        """Remove and return every queued item, most urgent first."""
        with self._cond:
            items = [entry[2] for entry in sorted(self._heap, key=_order)]
            self._heap.clear()
            return items

    def close(self) -> None:
        """Wake every waiter for good (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
