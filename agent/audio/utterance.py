"""The player thread's view of one utterance, and the rules for when it must end early.

:class:`Utterance` holds the converted frames of the item playing that are not written yet.
:func:`interruption` and :func:`starved` decide when it ends before its audio is out: shut
down or ``stop`` (cut at once), the producer failed or went quiet, or a more urgent item
waits (faded out over ``audio.fade_ms``). Expiry is the item's own rule
(:meth:`PlayItem._expired <agent.audio.item.PlayItem>`): an item is dropped if its deadline
passes while it is queued, never once it plays.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from agent.audio.convert import StreamConverter
from agent.audio.item import PRIORITY_URGENT, PlayItem
from agent.outcomes import Outcome, PlayerOutcome

__all__ = ["CLOSED", "STOPPED", "Ending", "Mark", "Utterance", "interruption", "preempts",
           "starved"]


@dataclass(frozen=True, slots=True)
class Ending:
    """Why an utterance ends early, and how."""

    kind: PlayerOutcome
    reason: str
    cut: bool
    """True: stop the device at once; False: fade out what follows."""


CLOSED = Ending(Outcome.INTERRUPTED, "player closed", cut=True)
STOPPED = Ending(Outcome.INTERRUPTED, "stopped", cut=True)


def preempts(waiting: PlayItem | None, playing: PlayItem) -> bool:
    """An urgent item (>= ``PRIORITY_URGENT``) more urgent than the one playing cuts in."""
    return (waiting is not None and waiting.priority >= PRIORITY_URGENT
            and waiting.priority > playing.priority)


def interruption(item: PlayItem, waiting: PlayItem | None) -> Ending | None:
    """Whether ``item`` must end now for its producer's failure or the ``waiting`` item."""
    _closed, failure, _chunks = item._source_state()
    if failure is not None:
        return Ending(Outcome.FAILED, failure, cut=False)
    if waiting is not None and preempts(waiting, item):
        return Ending(Outcome.INTERRUPTED, f"preempted by {waiting.request_id}", cut=False)
    return None


def starved(u: Utterance, timeout_s: float, now: float) -> Ending | None:
    """The producer has sent nothing for longer than ``timeout_s``."""
    if now - u.waiting_since > timeout_s:
        return Ending(Outcome.FAILED, f"no audio from synthesis for {timeout_s:g} s", cut=False)
    return None


@dataclass
class Mark:
    """An item whose last frame was written at device position ``end``."""

    end: int
    item: PlayItem
    audio_seconds: float


@dataclass
class Utterance:
    """Player-thread state of the item being played."""

    item: PlayItem
    epoch: int
    """The player's stop count when it began: a later ``stop`` cuts it."""
    converter: StreamConverter | None = None
    """Set once the device is open for the item's format."""
    pending: deque[np.ndarray] = field(default_factory=deque)
    pending_frames: int = 0
    audio_frames: int = 0
    """Frames of the item written to the device."""
    started: bool = False
    source_done: bool = False
    """The producer closed the item and every chunk has been converted."""
    waiting_since: float = field(default_factory=time.monotonic)
    """When the producer last made progress (or the last frame was written)."""
    placed: bool = False
    """A synchronized start is placed (:mod:`agent.audio.placement`); always False otherwise."""
    skip_frames: int = 0
    """Frames of the utterance still to drop before writing: it joined late."""
    skipped_frames: int = 0
    late_ms: float = 0.0
    filled: bool = False
    """The approach to a synchronized start wrote its first, larger feed."""

    @property
    def audio_seconds(self) -> float:
        rate = self.converter.rate if self.converter is not None else 1
        return self.audio_frames / rate

    def add(self, frames: np.ndarray) -> None:
        if len(frames):
            self.pending.append(frames)
            self.pending_frames += len(frames)

    def skip_late(self) -> None:
        """Drop pending frames the late join skips (as many as are here yet)."""
        dropped = len(self.take(min(self.skip_frames, self.pending_frames)))
        self.skip_frames -= dropped
        self.skipped_frames += dropped

    def take(self, count: int) -> np.ndarray:
        """Up to ``count`` pending frames, in order."""
        parts = []
        need = count
        while need > 0 and self.pending:
            head = self.pending[0]
            if len(head) <= need:
                parts.append(self.pending.popleft())
                need -= len(head)
            else:
                parts.append(head[:need])
                self.pending[0] = head[need:]
                need = 0
        if not parts:
            channels = self.converter.channels if self.converter is not None else 1
            return np.zeros((0, channels), dtype=np.float32)
        taken = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self.pending_frames -= len(taken)
        return taken
