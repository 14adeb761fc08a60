"""What the agent remembers of request ids, so a repeated id is answered and never run twice.

A ``(command, id)`` is *used up* once the command was accepted (a rejection leaves it free, so a
corrected retry is served); a repeat is answered by :class:`agent.mqtt.tracker.RequestTracker`,
``in_progress`` while the original runs, ``duplicate`` with its outcome after, for as long as
:class:`RecentIds` remembers it. Not thread-safe: the tracker calls it under its lock. Design:
docs/internals.md#repeated-ids.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from agent.outcomes import Outcome

__all__ = [
    "IN_PROGRESS_REASON",
    "MAX_REPEAT_ROUTES",
    "RECENT_IDS",
    "RECENT_TTL_S",
    "EndedWith",
    "Key",
    "RecentIds",
]

RECENT_IDS = 4096
"""Ended requests remembered for answering repeats..."""
RECENT_TTL_S = 600.0
"""...for this long after they ended (s)."""
MAX_REPEAT_ROUTES = 8
"""Response Topics of repeats kept per open request (further repeats get the final event on
the events topic only)."""
IN_PROGRESS_REASON = "duplicate of a request in progress; its final event follows"

Key = tuple[str, str]
"""``(command name, request id)``."""

@dataclass(frozen=True, slots=True)
class EndedWith:
    """How a request ended: its final event and the reason it carried. (A command that
    ended :data:`agent.outcomes.FREE_ID` was never accepted and is not remembered.)"""

    event: Outcome
    reason: str | None = None


class RecentIds:
    """Keys seen in the last ``ttl_s`` seconds, at most ``capacity`` of them, each with the
    :class:`EndedWith` remembered for it (if any). Not thread-safe.

    A QoS 1 redelivery or a controller's retry comes within seconds or minutes; the time bound
    keeps a controller that reuses a fixed id for a recurring announcement from being ignored,
    the capacity bounds the memory.
    """

    def __init__(self, capacity: int = RECENT_IDS, ttl_s: float = RECENT_TTL_S) -> None:
        self.capacity = capacity
        self.ttl_s = ttl_s
        self._keys: OrderedDict[Key, tuple[float, EndedWith | None]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def _prune(self, now: float, room: int = 0) -> None:
        while self._keys:
            first_seen, _ = next(iter(self._keys.values()))
            if now - first_seen <= self.ttl_s and len(self._keys) + room <= self.capacity:
                return
            self._keys.popitem(last=False)

    def remember(self, key: Key, outcome: EndedWith | None = None,
                 now: float | None = None) -> None:
        """Remember ``key`` (with ``outcome``) from ``now`` on, replacing what was known of it."""
        now = time.monotonic() if now is None else now
        self._keys.pop(key, None)
        self._prune(now, room=1)
        self._keys[key] = (now, outcome)

    def recall(self, key: Key, now: float | None = None) -> tuple[bool, EndedWith | None]:
        """Whether ``key`` is remembered within the window, and its outcome."""
        self._prune(time.monotonic() if now is None else now)
        if key not in self._keys:
            return False, None
        return True, self._keys[key][1]

    def seen(self, key: Key, now: float | None = None) -> bool:
        """True if ``key`` was seen within the window; otherwise remember it and return False."""
        now = time.monotonic() if now is None else now
        known, _ = self.recall(key, now)
        if not known:
            self.remember(key, None, now)
        return known
