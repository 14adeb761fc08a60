"""Speak jobs: what the pipeline is asked to say, and the bounded queue they wait in.

A :class:`SpeakRequest` is the pipeline's own, transport-free view of a request: the MQTT side
builds one from its ``SpeakCommand`` (:func:`agent.mqtt.dispatch.speak_request`), ``tts-agent
say`` from its command line. A :class:`SpeakJob` is an accepted request with its id and
deadline; :class:`JobQueue` holds them for the synthesis worker, most urgent first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.audio.item import PRIORITY_NORMAL
from agent.bounded_queue import BoundedPriorityQueue, Full
from agent.text.document import Document
from agent.voice.voice import SynthesisParams

__all__ = ["JobQueue", "JobsFull", "SpeakJob", "SpeakRequest"]


@dataclass(frozen=True, slots=True)
class SpeakRequest:
    """What to say and how; every ``None`` means "the voice's (or player's) default"."""

    text: str
    voice: str | None = None
    """Voice name; None: the library's default voice."""
    priority: int = PRIORITY_NORMAL
    """Higher is more urgent (:mod:`agent.audio.item` names the levels)."""
    volume: float | None = None
    """This request's volume, 0.0-1.0 (applied in software); None: 1.0."""
    speed: float | None = None
    """Speaking rate relative to the voice's default (2.0 = twice as fast); when set it
    decides the length scale, whatever ``params`` says."""
    params: SynthesisParams = field(default_factory=SynthesisParams)
    """Further synthesis settings (noise, speaker; the CLI's flags)."""
    chime: str | None = None
    """A chime (a name in the chimes directory) played right before the speech; None: none."""
    document: Document | None = None
    """What to say as a document (SSML); None: ``text`` as plain text."""
    start_at: float | None = None
    """Unix time (s) its first sample must reach the speaker (a synchronized group speak,
    :mod:`agent.audio.sync_start`); None: as soon as it can."""

    def __post_init__(self) -> None:
        if self.volume is not None and not 0.0 <= self.volume <= 1.0:
            raise ValueError(f"volume {self.volume} outside 0.0-1.0")
        if self.speed is not None and not self.speed > 0.0:
            raise ValueError(f"speed {self.speed} must be positive")

    def synthesis_params(self, voice_length_scale: float) -> SynthesisParams:
        """The settings to synthesize with, for a voice whose own length scale is
        ``voice_length_scale``: ``speed`` divides it."""
        if self.speed is None:
            return self.params
        return dataclasses.replace(self.params, length_scale=voice_length_scale / self.speed)


@dataclass(frozen=True, slots=True)
class SpeakJob:
    """One accepted speak request waiting for (or in) synthesis."""

    request_id: str
    request: SpeakRequest
    deadline: float | None
    """``time.monotonic()`` by which playback must start, or None."""

    @property
    def priority(self) -> int:
        return self.request.priority

    def expired(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline


class JobsFull(Exception):
    """The job queue is at its limit."""


class JobQueue:
    """Bounded queue of speak jobs, most urgent first, FIFO within a priority. Thread-safe.

    Its bound is the agent's backlog of accepted requests that are not yet synthesized: the
    synthesis worker takes a job only when the player has room for it, so while the player is
    behind, jobs wait here and a full queue is what refuses new requests (``busy``).
    """

    def __init__(self, maxsize: int) -> None:
        self._jobs: BoundedPriorityQueue[SpeakJob] = BoundedPriorityQueue(maxsize)

    @property
    def maxsize(self) -> int:
        return self._jobs.maxsize

    def __len__(self) -> int:
        return len(self._jobs)

    def put(self, job: SpeakJob) -> int:
        """Queue ``job``; returns how many queued jobs are ahead of it. Raises JobsFull."""
        try:
            return self._jobs.put(job, job.priority)
        except Full as exc:
            raise JobsFull(f"busy: {exc.maxsize} speak requests already queued") from None

    def pop_above(self, priority: int | None, timeout: float = 0.0, *,
                  admit: Callable[[int], bool] | None = None) -> SpeakJob | None:
        """The most urgent job if its priority is above ``priority`` (any job when None) and
        ``admit`` (e.g. "the player has room for it") accepts that priority.

        Waits up to ``timeout`` for one to arrive.
        """
        return self._jobs.pop_above(priority, timeout, admit=admit)

    def head(self) -> SpeakJob | None:
        """The job :meth:`pop_above` would consider first, left in place."""
        return self._jobs.head()

    def take_expired(self, now: float) -> list[SpeakJob]:
        """Remove and return the queued jobs whose deadline has passed."""
        return self._jobs.take(lambda job: job.expired(now))

    def take_all(self) -> list[SpeakJob]:
        """Remove and return every queued job, most urgent first."""
        return self._jobs.take_all()

    def close(self) -> None:
        """Wake any waiter for good (shutdown)."""
        self._jobs.close()
