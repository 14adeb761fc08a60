"""The one outcome vocabulary: the events a command moves through, how it ends, model events.

:class:`Outcome` holds every final event (a command gets exactly one), :class:`Progress` the
events before it; their values are the words on the wire (MQTT events and replies, Hermes,
Wyoming's counts, the health report, ``tts-agent send``'s exit status). The subsets below say
who may end a request how. :class:`Reporter` is where the synthesis worker and the player both
report a request (the daemon's :class:`agent.mqtt.tracker.RequestTracker`). :class:`VoiceEvent`
is what the voice library reports. docs/mqtt-protocol.md describes the events on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Literal, Protocol, get_args

__all__ = [
    "DUPLICATE_OF",
    "FREE_ID",
    "HERMES_NORMAL",
    "PLAYER_EVENTS",
    "SPEAK_OUTCOMES",
    "SUCCESS",
    "WORKER_OUTCOMES",
    "WYOMING_OUTCOMES",
    "DuplicateOf",
    "EventName",
    "Outcome",
    "PlayerEvent",
    "PlayerOutcome",
    "Progress",
    "Reporter",
    "SpeakOutcome",
    "VoiceEvent",
    "VoiceEventKind",
    "WorkerOutcome",
    "WyomingOutcome",
]


class Outcome(StrEnum):
    """The final event of a command; each command gets exactly one."""

    FINISHED = "finished"
    """A speak request was played out."""
    FAILED = "failed"
    REJECTED = "rejected"
    """Refused before it was accepted (its id stays free)."""
    EXPIRED = "expired"
    """Its deadline passed before it started playing."""
    INTERRUPTED = "interrupted"
    """Cut by a more urgent request, a ``stop`` or shutdown."""
    DONE = "done"
    """A control command (stop, volume, reload) ran."""
    PONG = "pong"
    """The answer to ``ping``."""
    DUPLICATE = "duplicate"
    """A repeat of an id that has ended (its ``outcome`` names how)."""


class Progress(StrEnum):
    """An event before a command's final one."""

    ACCEPTED = "accepted"
    STARTED = "started"
    """The first frame of the request's audio was written to the device."""
    IN_PROGRESS = "in_progress"
    """A repeat of an id that is still open (the original's final event follows)."""
    PROGRESS = "progress"
    """A heartbeat of an open speak request."""


EventName = Outcome | Progress
"""Every event a command can have."""

WorkerOutcome = Literal[Outcome.FAILED, Outcome.EXPIRED]
"""The final events the synthesis worker gives a job that never reached the player."""
PlayerOutcome = Literal[Outcome.FINISHED, Outcome.INTERRUPTED, Outcome.FAILED, Outcome.EXPIRED]
"""How the player ends a play item."""
PlayerEvent = Literal[Progress.STARTED] | PlayerOutcome
"""The events of a play item (at most one ``started``, then exactly one outcome)."""
SpeakOutcome = Literal[Outcome.FINISHED, Outcome.FAILED, Outcome.REJECTED, Outcome.EXPIRED,
                       Outcome.INTERRUPTED]
"""How a speak request ends: what the health report counts."""
WyomingOutcome = Literal[Outcome.FINISHED, Outcome.FAILED, Outcome.REJECTED,
                         Outcome.INTERRUPTED]
"""How a Wyoming request ends (its counts in the health report's ``wyoming`` section)."""
DuplicateOf = Literal[Outcome.FINISHED, Outcome.FAILED, Outcome.EXPIRED, Outcome.INTERRUPTED,
                      Outcome.DONE, Outcome.PONG]
"""What a ``duplicate`` can name as the original's outcome (only ids that were used up)."""

WORKER_OUTCOMES: Final[frozenset[WorkerOutcome]] = frozenset(get_args(WorkerOutcome))
PLAYER_EVENTS: Final[tuple[PlayerEvent, ...]] = (Progress.STARTED, *get_args(PlayerOutcome))
SPEAK_OUTCOMES: Final[tuple[SpeakOutcome, ...]] = get_args(SpeakOutcome)
WYOMING_OUTCOMES: Final[tuple[WyomingOutcome, ...]] = get_args(WyomingOutcome)
DUPLICATE_OF: Final[frozenset[DuplicateOf]] = frozenset(get_args(DuplicateOf))
SUCCESS: Final = frozenset({Outcome.FINISHED, Outcome.DONE, Outcome.PONG})
"""Final events that mean the command did what it was asked (``send``'s exit status 0)."""
FREE_ID: Final = frozenset({Outcome.REJECTED, Outcome.EXPIRED})
"""Final events of a command that was never accepted: they leave its id free."""
HERMES_NORMAL: Final = frozenset({Outcome.FINISHED, Outcome.INTERRUPTED})
"""Hermes endings that are not an error (others send ``hermes/error/tts`` first)."""


class Reporter(Protocol):
    """Where a speak request's events go: the synthesis worker (synthesis thread) and the
    player (player thread) both report here. Each request gets one final event: whoever calls
    :meth:`finish` first wins, later calls return False."""

    def is_open(self, request_id: str) -> bool:
        """False once the request has had its final event (e.g. cleared by a stop)."""
        ...

    def note(self, request_id: str, **fields: object) -> None:
        """Facts for the request's later events: ``voice``, ``version``, ``synthesis_ms``."""
        ...

    def progress(self, request_id: str, event: Progress, **fields: object) -> bool:
        """A non-final event (the player's ``started``); False if no longer open."""
        ...

    def finish(self, request_id: str, event: Outcome, *, reason: str | None = None,
               audio_s: float | None = None) -> bool:
        """The final event (with its ``reason`` and the seconds of audio played)."""
        ...


class VoiceEventKind(StrEnum):
    """What the voice library reports about a voice (the ``event`` on the wire)."""

    LOADED = "model_loaded"
    """A voice (version) was swapped in and serves."""
    REJECTED = "model_rejected"
    """A voice's files were refused; what served before keeps serving."""
    DAMAGED = "model_damaged"
    """A file of a live voice's bundle that it does not serve is damaged."""


@dataclass(frozen=True, slots=True)
class VoiceEvent:
    """One model event (:mod:`agent.library.events` makes them, the MQTT publisher sends
    them as :class:`agent.mqtt.protocol.ModelEvent`). None: not part of this kind."""

    kind: VoiceEventKind
    voice: str
    version: str | None = None
    reason: str | None = None
    """Of a rejected or damaged voice: why."""
    variant: str | None = None
    """Of a loaded or damaged voice: the variant it serves (``fp32``, ``int8``)."""
    sha256: Mapping[str, str] | None = None
    """Of a loaded voice: its files' digests."""
    load_s: float | None = None
    provider: str | None = None
    previous_version: str | None = None
    """Of a loaded voice: the version it replaced (None: none)."""
    signed_by: str | None = None
    """Of a loaded voice: the trusted key that signed it (None: unsigned)."""
    variant_reason: str | None = None
    """Of a loaded voice: why it serves this variant, or what is known of its provenance."""
    files: tuple[str, ...] = field(default=())
    """Of a damaged voice: the damaged files."""
