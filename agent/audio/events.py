"""How the player's events leave it: each item settled once, counted, logged, reported.

:class:`PlayerEvents` is the one way the player ends an item, and it reports through the same
:class:`agent.outcomes.Reporter` as the synthesis worker: ``started`` as
:meth:`~agent.outcomes.Reporter.progress`, the final event as
:meth:`~agent.outcomes.Reporter.finish`. :meth:`~PlayerEvents.finish` (player thread) settles
the item and reports at once; :meth:`~PlayerEvents.settle_later` (any thread:
``stop(flush=True)``, ``close``) settles it at once, so it can never play, and leaves the event
for the player thread to report with :meth:`~PlayerEvents.emit_pending`, since the reporter is
only ever called on that thread.
"""

from __future__ import annotations

import threading
from collections import deque

from agent.audio.item import PlaybackEvent, PlayItem
from agent.audio.stats import PlayerBook
from agent.logs import get_logger
from agent.outcomes import PlayerOutcome, Progress, Reporter

__all__ = ["PlayerEvents"]

log = get_logger(__name__)


class PlayerEvents:
    """The player's events and their reporter (see the module docstring)."""

    def __init__(self, reporter: Reporter, book: PlayerBook) -> None:
        self._reporter = reporter
        self._book = book
        self._lock = threading.Lock()
        self._pending: deque[PlaybackEvent] = deque()

    def finish(self, item: PlayItem, kind: PlayerOutcome, reason: str | None,
               audio_seconds: float = 0.0) -> None:
        """End ``item`` with ``kind`` unless it has ended already (player thread)."""
        event = PlaybackEvent(kind, item.request_id, reason, round(audio_seconds, 3))
        if item._settle(event):
            self.deliver(event)

    def settle_later(self, item: PlayItem, kind: PlayerOutcome, reason: str) -> None:
        """End ``item`` now and report it from the player thread (any thread)."""
        event = PlaybackEvent(kind, item.request_id, reason)
        if item._settle(event):
            with self._lock:
                self._pending.append(event)

    def emit_pending(self) -> None:
        """Report what :meth:`settle_later` left (player thread)."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                event = self._pending.popleft()
            self.deliver(event)

    def deliver(self, event: PlaybackEvent) -> None:
        """Count, log and report one event (player thread); the reporter's errors are
        logged, never raised."""
        self._book.count_event(event.kind)
        log.info("playback_event", kind=event.kind, request_id=event.request_id,
                 reason=event.reason, audio_seconds=event.audio_seconds)
        try:
            if event.kind is Progress.STARTED:
                self._reporter.progress(event.request_id, Progress.STARTED,
                                        **(event.detail or {}))
            else:
                self._reporter.finish(event.request_id, event.kind, reason=event.reason,
                                      audio_s=round(event.audio_seconds, 3))
        except Exception:
            log.exception("playback_event_handler_failed", kind=event.kind)

