"""How the player's events leave it: each item settled once, counted, logged, handed on.

:class:`PlayerEvents` is the one way the player ends an item. :meth:`~PlayerEvents.finish`
(player thread) settles the item and calls ``on_event`` at once;
:meth:`~PlayerEvents.settle_later` (any thread: ``stop(flush=True)``, ``close``) settles it
at once, so it can never play, and leaves the event for the player thread to hand on with
:meth:`~PlayerEvents.emit_pending`, since ``on_event`` only ever runs on that thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from agent.audio.item import EventKind, PlaybackEvent, PlayItem
from agent.audio.stats import PlayerBook
from agent.logs import get_logger

__all__ = ["PlayerEvents"]

log = get_logger(__name__)


class PlayerEvents:
    """The player's events and their receiver (see the module docstring)."""

    def __init__(self, on_event: Callable[[PlaybackEvent], None], book: PlayerBook) -> None:
        self._on_event = on_event
        self._book = book
        self._lock = threading.Lock()
        self._pending: deque[PlaybackEvent] = deque()

    def finish(self, item: PlayItem, kind: EventKind, reason: str | None,
               audio_seconds: float = 0.0) -> None:
        """End ``item`` with ``kind`` unless it has ended already (player thread)."""
        event = PlaybackEvent(kind, item.request_id, reason, round(audio_seconds, 3))
        if item._settle(event):
            self.deliver(event)

    def settle_later(self, item: PlayItem, kind: EventKind, reason: str) -> None:
        """End ``item`` now and tell ``on_event`` from the player thread (any thread)."""
        event = PlaybackEvent(kind, item.request_id, reason)
        if item._settle(event):
            with self._lock:
                self._pending.append(event)

    def emit_pending(self) -> None:
        """Hand on what :meth:`settle_later` left (player thread)."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                event = self._pending.popleft()
            self.deliver(event)

    def deliver(self, event: PlaybackEvent) -> None:
        """Count, log and hand on one event (player thread); the receiver's errors are
        logged, never raised."""
        self._book.count_event(event.kind)
        log.info("playback_event", kind=event.kind, request_id=event.request_id,
                 reason=event.reason, audio_seconds=event.audio_seconds)
        try:
            self._on_event(event)
        except Exception:
            log.exception("playback_event_handler_failed", kind=event.kind)
