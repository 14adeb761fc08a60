"""One utterance on its way to the speaker, and the events its playback produces.

A :class:`PlayItem` is filled by the synthesis worker (any thread) through
:meth:`PlayItem.put`, :meth:`PlayItem.close` and :meth:`PlayItem.fail`, and drained
by the player thread. Its chunk buffer is bounded by seconds of audio: ``put`` waits
while the item holds more than ``max_buffered_s`` that the player has not taken yet.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from agent.audio.format import AudioChunk, AudioFormat
from agent.audio.sync_start import SyncStart
from agent.outcomes import PlayerEvent

__all__ = [
    "PRIORITIES",
    "PRIORITY_HIGH",
    "PRIORITY_LOW",
    "PRIORITY_NORMAL",
    "PRIORITY_URGENT",
    "EventKind",
    "PlayItem",
    "PlaybackEvent",
    "parse_priority",
]

PRIORITY_LOW = -10
PRIORITY_NORMAL = 0
PRIORITY_HIGH = 10
PRIORITY_URGENT = 100
"""Items at or above this priority interrupt a less urgent utterance that is playing."""
PRIORITIES = {
    "low": PRIORITY_LOW,
    "normal": PRIORITY_NORMAL,
    "high": PRIORITY_HIGH,
    "urgent": PRIORITY_URGENT,
}

EventKind = PlayerEvent
"""A play item's events: :data:`agent.outcomes.PlayerEvent` (the one vocabulary's words)."""


def parse_priority(value: str | int) -> int:
    """A priority name (``low``/``normal``/``high``/``urgent``) or an int in -1000..1000."""
    if isinstance(value, bool):
        raise ValueError("priority must be a name or an integer")
    if isinstance(value, int):
        if not -1000 <= value <= 1000:
            raise ValueError(f"priority {value} out of range -1000..1000")
        return value
    try:
        return PRIORITIES[value.strip().lower()]
    except KeyError:
        names = ", ".join(PRIORITIES)
        raise ValueError(f"unknown priority {value!r} (use {names} or an integer)") from None


@dataclass(frozen=True, slots=True)
class PlaybackEvent:
    """Something that happened to one request's audio.

    ``started``: the first frame of the request's audio was written to the device.
    ``finished``: all of it has been played out (drained from the device buffer).
    ``interrupted``: cut by a more urgent item, ``stop`` or shutdown (``reason`` says which).
    ``failed``: the device failed or the producer called :meth:`PlayItem.fail`.
    ``expired``: its ``expires_at`` passed while it waited in the queue; nothing was played.
    Every item gets exactly one of the last four.
    """

    kind: EventKind
    request_id: str
    reason: str | None = None
    audio_seconds: float = 0.0
    """Seconds of the request's audio written to the device so far."""
    detail: dict[str, float] | None = None
    """More facts for the event (a synchronized start's, on ``started``)."""


class PlayItem:
    """One utterance: metadata plus a bounded stream of :class:`AudioChunk`.

    Producer side (any thread): :meth:`put` each chunk as it is synthesized, then
    :meth:`close`, or :meth:`fail` with a reason. ``put`` returns False once the
    player no longer wants audio (played, interrupted, expired, failed): stop
    synthesizing then. :meth:`wait` blocks until the item's final event.
    """

    def __init__(
        self,
        request_id: str,
        *,
        priority: int = PRIORITY_NORMAL,
        volume: float = 1.0,
        expires_at: float | None = None,
        format: AudioFormat | None = None,
        max_buffered_s: float = 30.0,
        sync: SyncStart | None = None,
    ) -> None:
        if not 0.0 <= volume <= 1.0:
            raise ValueError(f"volume {volume} outside 0.0-1.0")
        if max_buffered_s <= 0:
            raise ValueError("max_buffered_s must be positive")
        self.request_id = request_id
        self.priority = priority
        self.volume = volume
        self.expires_at = expires_at
        """``time.monotonic()`` deadline to start playing by, or None."""
        self.format = format
        """The chunks' format when known up front: the device is then opened before the
        first chunk arrives. None: the player waits for the first chunk."""
        self._max_buffered_s = max_buffered_s
        self.sync = sync
        """A synchronized start (:mod:`agent.audio.sync_start`): held in the queue until
        shortly before its time, then started so that its first sample plays at it."""
        self._cond = threading.Condition()
        self._chunks: deque[AudioChunk] = deque()
        self._buffered_s = 0.0
        self._closed = False
        self._failure: str | None = None
        self._result: PlaybackEvent | None = None
        self._done = threading.Event()
        self._wake: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"PlayItem({self.request_id!r}, priority={self.priority})"

    # -- producer side ---------------------------------------------------------------

    def put(self, chunk: AudioChunk, timeout: float | None = None) -> bool:
        """Queue a chunk for playback (producer thread).

        Waits while the item already buffers ``max_buffered_s`` of audio. Returns True
        when accepted, False when the item is over (no more audio wanted). Raises
        TimeoutError when ``timeout`` passes while full, RuntimeError after
        :meth:`close`/:meth:`fail`.
        """
        if not isinstance(chunk, AudioChunk):
            raise TypeError("put() takes an AudioChunk")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._closed or self._failure is not None:
                raise RuntimeError(f"put() after close() or fail() on {self.request_id}")
            while (
                self._result is None
                and self._chunks
                and self._buffered_s + chunk.seconds > self._max_buffered_s
            ):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"audio buffer of {self.request_id} stayed full")
                self._cond.wait(remaining)
            if self._result is not None:
                return False
            self._chunks.append(chunk)
            self._buffered_s += chunk.seconds
        self._notify_player()
        return True

    def close(self) -> None:
        """No more chunks will come (producer thread); the player plays out and finishes."""
        with self._cond:
            self._closed = True
        self._notify_player()

    def fail(self, reason: str) -> None:
        """Synthesis failed (producer thread): playback stops (with a fade) and the
        item ends with a ``failed`` event carrying ``reason``."""
        with self._cond:
            if self._failure is None and not self._closed:
                self._failure = reason or "synthesis failed"
        self._notify_player()

    @property
    def wanted(self) -> bool:
        """False once the item has its final event: synthesizing more is pointless."""
        return self._result is None

    @property
    def result(self) -> PlaybackEvent | None:
        """The final event (finished/interrupted/failed/expired), or None while pending."""
        return self._result

    def wait(self, timeout: float | None = None) -> PlaybackEvent | None:
        """Block until the final event (any thread); None if ``timeout`` passed first."""
        self._done.wait(timeout)
        return self._result

    # -- player side (player thread unless noted) ---------------------------------------

    def _bind(self, wake: Callable[[], None]) -> None:
        """Called by ``AudioPlayer.submit`` (submitting thread): wake the player on input."""
        self._wake = wake

    def _notify_player(self) -> None:
        wake = self._wake
        if wake is not None:
            wake()

    def _take(self) -> AudioChunk | None:
        """The next chunk, or None when none is waiting."""
        with self._cond:
            if not self._chunks:
                return None
            chunk = self._chunks.popleft()
            self._buffered_s = max(0.0, self._buffered_s - chunk.seconds)
            self._cond.notify_all()
            return chunk

    def _source_state(self) -> tuple[bool, str | None, bool]:
        """(closed, failure reason, chunks waiting) as one consistent snapshot."""
        with self._cond:
            return self._closed, self._failure, bool(self._chunks)

    def _expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def _settle(self, event: PlaybackEvent) -> bool:
        """Record the final event (any thread); False if the item already had one."""
        with self._cond:
            if self._result is not None:
                return False
            self._result = event
            self._chunks.clear()
            self._buffered_s = 0.0
            self._cond.notify_all()
        self._done.set()
        return True
