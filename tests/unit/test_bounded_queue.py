"""The generic bounded priority queue behind the speak job queue and the play queue."""

from __future__ import annotations

import threading
import time

import pytest

from agent.bounded_queue import BoundedPriorityQueue, Full


def test_priority_descending_then_first_come_first_served() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(8)
    for name, priority in [("n1", 0), ("l1", -10), ("u1", 100), ("n2", 0), ("h1", 10),
                           ("u2", 100), ("n3", 0)]:
        q.put(name, priority)
    assert q.head() == "u1" and len(q) == 7  # head leaves it in place
    assert [q.pop() for _ in range(7)] == ["u1", "u2", "h1", "n1", "n2", "n3", "l1"]
    assert q.pop() is None and q.head() is None


def test_put_counts_the_items_ahead() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(8)
    assert q.put("n1", 0) == 0
    assert q.put("l1", -10) == 1
    assert q.put("u1", 100) == 0
    assert q.put("n2", 0) == 2  # behind u1 and n1, ahead of l1


def test_bound_refuses_with_a_clear_error() -> None:
    q: BoundedPriorityQueue[int] = BoundedPriorityQueue(2)
    q.put(1, 0)
    q.put(2, 0)
    with pytest.raises(Full, match=r"queue full \(2 items\)") as caught:
        q.put(3, 1000)  # not even an urgent item gets in
    assert caught.value.maxsize == 2 and len(q) == 2
    q.pop()
    q.put(3, 0)
    assert len(q) == 2
    with pytest.raises(ValueError):
        BoundedPriorityQueue(0)


def test_pop_above_only_takes_more_urgent_items() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(4)
    q.put("n", 0)
    assert q.pop_above(0) is None  # equal is not above
    q.put("h", 10)
    assert q.pop_above(0) == "h"
    assert q.pop_above(None) == "n"


def test_pop_waits_for_the_timeout_then_gives_up() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(4)
    started = time.monotonic()
    assert q.pop(timeout=0.2) is None
    assert time.monotonic() - started >= 0.2
    q.put("low", -10)
    started = time.monotonic()
    assert q.pop_above(0, timeout=0.2) is None  # a waiting low item does not end the wait
    assert time.monotonic() - started >= 0.2
    assert len(q) == 1


def test_pop_wakes_when_an_item_arrives() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(4)
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(q.pop_above(0, timeout=30)))
    waiter.start()
    time.sleep(0.05)
    q.put("normal", 0)  # not above 0: the waiter keeps waiting
    q.put("urgent", 100)
    waiter.join(10)
    assert got == ["urgent"]
    assert q.head() == "normal"


def test_close_wakes_every_waiter_for_good() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(4)
    results: list[str | None] = []
    waiters = [threading.Thread(target=lambda: results.append(q.pop(timeout=None)))
               for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    assert not q.closed
    q.close()
    for waiter in waiters:
        waiter.join(10)
    assert not any(waiter.is_alive() for waiter in waiters)
    assert results == [None, None, None] and q.closed
    started = time.monotonic()
    assert q.pop(timeout=30) is None  # no more waiting once closed
    assert time.monotonic() - started < 5
    q.put("late", 0)  # a closed queue still holds and hands out what it is given
    assert q.pop(timeout=30) == "late"


def test_take_removes_matching_items_in_queue_order() -> None:
    q: BoundedPriorityQueue[int] = BoundedPriorityQueue(8)
    for value, priority in [(1, 0), (2, 0), (3, 10), (4, -10), (6, 10)]:
        q.put(value, priority)
    assert q.take(lambda v: v % 2 == 0) == [6, 2, 4]
    assert q.take(lambda v: v > 100) == []
    assert len(q) == 2 and q.head() == 3
    q.put(5, 100)
    assert q.take_all() == [5, 3, 1]
    assert len(q) == 0 and q.take_all() == []


def test_concurrent_producers_never_exceed_the_bound() -> None:
    q: BoundedPriorityQueue[int] = BoundedPriorityQueue(50)
    refused: list[int] = []
    barrier = threading.Barrier(4)

    def producer(base: int) -> None:
        barrier.wait()
        for n in range(40):
            try:
                q.put(base + n, n % 3)
            except Full:
                refused.append(base + n)

    threads = [threading.Thread(target=producer, args=(k * 100,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(q) == 50 and len(refused) == 110
    items = q.take_all()
    assert len(set(items)) == 50 and not set(items) & set(refused)


def test_room_for_is_the_bound_and_overtake_lets_a_more_urgent_item_past_it() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(2, overtake=2)
    assert q.room_for(0)
    q.put("n1", 0)
    q.put("n2", 0)
    assert not q.room_for(0) and not q.room_for(-10)  # full for anything not more urgent
    with pytest.raises(Full):
        q.put("n3", 0)
    assert q.room_for(10)
    q.put("h1", 10)  # more urgent than everything queued: it overtakes the full queue
    assert not q.room_for(10) and q.room_for(100)  # not above h1 now; urgent still is
    q.put("u1", 100)
    assert not q.room_for(1000)  # maxsize + overtake reached
    with pytest.raises(Full):
        q.put("x", 1000)
    assert [q.pop() for _ in range(4)] == ["u1", "h1", "n1", "n2"]
    with pytest.raises(ValueError):
        BoundedPriorityQueue(2, overtake=-1)


def test_room_for_a_priority_implies_room_for_a_more_urgent_one() -> None:
    q: BoundedPriorityQueue[int] = BoundedPriorityQueue(3, overtake=3)
    for n, priority in enumerate([0, 10, -10, 100, 5, 20]):
        if q.room_for(priority):
            q.put(n, priority)
        for low in range(-20, 120, 5):
            if q.room_for(low):
                assert all(q.room_for(high) for high in range(low, 120, 5))
    assert len(q) <= 6


def test_wait_room_wakes_when_an_item_leaves() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(1)
    q.put("playing-next", 0)
    assert q.wait_room(0, timeout=0.0) is False
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait_room(0, timeout=30)))
    waiter.start()
    assert q.pop() == "playing-next"
    waiter.join(10)
    assert got == [True]
    q.put("a", 0)
    for remove in (lambda: q.take(lambda item: True), q.take_all):
        got.clear()
        waiter = threading.Thread(target=lambda: got.append(q.wait_room(0, timeout=30)))
        waiter.start()
        remove()
        waiter.join(10)
        assert got == [True]
        q.put("a", 0)


def test_pop_above_with_admit_leaves_items_it_does_not_admit() -> None:
    q: BoundedPriorityQueue[str] = BoundedPriorityQueue(4)
    q.put("n", 0)
    q.put("u", 100)
    assert q.pop_above(None, admit=lambda priority: priority < 100) is None  # head not admitted
    assert len(q) == 2
    assert q.pop_above(None, admit=lambda priority: True) == "u"
    assert q.pop_above(None, admit=lambda priority: priority == 0) == "n"
