"""The events the agent publishes: strict pydantic schemas (part of :mod:`agent.mqtt.protocol`,
which names them too).

Every event has ``id``, ``event``, ``device``, ``ts`` (Unix time, s) and ``final`` (true for
the one event that ends a command). Other modules (health, model lifecycle) subclass
:class:`EventBase` for their own events and publish them with the same publisher.
"""

from __future__ import annotations

import time
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from agent.outcomes import DuplicateOf, EventName, Outcome

__all__ = ["FINAL_EVENTS", "INSTANCE_DOC", "CommandEvent", "EventBase", "ModelEvent",
           "PingStatus", "Presence", "Priority", "to_payload"]

Priority = Literal["low", "normal", "high", "urgent"]
"""Served most urgent first; ``urgent`` interrupts what is playing (see agent.audio.item)."""

FINAL_EVENTS: Final = frozenset(Outcome)
"""Events that end a command (:class:`agent.outcomes.Outcome`); each gets exactly one of them.

A repeated id (see :mod:`agent.mqtt.repeats`) is answered with ``in_progress`` (not final: the
original's final event follows) or with the final ``duplicate``, whose ``outcome`` names how
the original ended."""


INSTANCE_DOC = ("The agent process that published it (random at each start): two instance "
                "ids for one device mean two agents use the same device id.")


class EventBase(BaseModel):
    """Common fields of everything published on ``{prefix}/{device}/events``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Request id (or an id for an unsolicited event).")
    event: str = Field(description="What happened.")
    device: str = Field(description="The device that publishes the event.")
    ts: float = Field(default_factory=time.time, description="Unix time of the event (s).")
    instance: str | None = Field(default=None, description=INSTANCE_DOC)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def final(self) -> bool:
        """True for the one event that ends a command."""
        return self.event in FINAL_EVENTS


class PingStatus(BaseModel):
    """The small status a ``ping`` answers with (the full health snapshot is separate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: Literal["online", "stopping"]
    version: str
    uptime_s: float
    voices: list[str]
    default_voice: str
    pending: int = Field(description="Speak requests accepted and not yet finished.")
    volume: float
    mqtt_reconnects: int
    groups: list[str] = Field(
        default_factory=list, description="The groups the device follows (`mqtt.groups`): "
        "how `fleet` and `send --group --wait` learn them from a ping where the broker does "
        "not deliver retained status to a wildcard subscription.")
    health: dict[str, Any] | None = Field(
        default=None, description="Overall health: {state: ok|degraded|failing, reasons: [...]}; "
        "the full report is retained on the health topic.")


class CommandEvent(EventBase):
    """An answer to a command: progress (accepted, started, and ``progress`` while an open
    speak request has nothing else to say) or its one final event; for a repeated id
    ``in_progress`` (the original's final follows) or the final ``duplicate``."""

    event: EventName
    command: str | None = Field(default=None, description="The command name as received.")
    reason: str | None = Field(default=None, description="Why it was rejected/failed/cut.")
    outcome: DuplicateOf | None = (
        Field(default=None, description="In a `duplicate`: the final event the original "
              "request ended with (its `reason` is repeated in `reason`)."))
    state: Literal["waiting", "playing"] | None = Field(
        default=None, description="In `progress`: `waiting` (accepted, nothing played yet) or "
        "`playing` (its first audio frame was written).")
    voice: str | None = None
    version: str | None = Field(default=None, description="Voice version used.")
    warnings: list[str] | None = Field(default=None, description="From `started` on: what the "
                                       "SSML asked that was ignored (`ignored <prosody pitch>`).")
    priority: Priority | None = None
    pending: int | None = Field(default=None, description="Requests ahead when accepted.")
    audio_s: float | None = Field(default=None, description="Seconds of audio played.")
    synthesis_ms: float | None = Field(default=None, description="Time spent synthesizing (ms).")
    replayed: bool | None = Field(
        default=None, description="True on the events of a request queued again from the "
        "request journal after a restart (mqtt.journal.replay).")
    progress_interval_s: float | None = Field(
        default=None, description="In `accepted`: the device's `mqtt.progress_interval_s`, the "
        "longest an open speak request goes without an event (`send --wait` waits at least "
        "twice that for the next one).")
    journaled: bool | None = Field(
        default=None, description="False in an `accepted` whose request the request journal "
        "could not write (health `degraded`): it is served, but not answered after a crash.")
    start_at_ms: float | None = Field(
        default=None, description="From `started` on, for a speak with a start time (`at`): "
        "that time, Unix ms (docs/fleet.md#synchronized-group-speech).")
    late_by_ms: float | None = Field(
        default=None, description="With `start_at_ms`: how late the device was for it (0: on "
        "time, its first sample placed by the sound card's delay).")
    skipped_ms: float | None = Field(
        default=None, description="With `start_at_ms`: audio skipped to join late at the sample "
        "due (`audio.sync_late = join`).")
    volume: float | None = None
    voices: list[str] | None = None
    status: PingStatus | None = None


class ModelEvent(EventBase):
    """``model_loaded`` / ``model_rejected`` from the voice library (see agent.library.voices),
    and ``model_damaged``: a file of a live voice's bundle that it does not serve is damaged.

    Extra keys the library reports are kept: the library is our own code, not remote input.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    event: Literal["model_loaded", "model_rejected", "model_damaged"]
    voice: str
    version: str | None = None
    reason: str | None = None
    variant: str | None = Field(
        default=None, description="The variant served (`fp32`, `int8`).")
    variant_reason: str | None = Field(
        default=None, description="In a `model_loaded`: why this variant is served and not the "
        "wanted one (a stale int8, one the bundle lacks), or that its provenance is unknown.")
    files: list[str] | None = Field(
        default=None, description="In a `model_damaged`: the damaged files (not served).")
    signed_by: str | None = Field(
        default=None, description="In a `model_loaded`: the id of the trusted key that signed "
        "the voice (models.trusted_keys); null when it is unsigned.")


class Presence(BaseModel):
    """Retained presence on ``{prefix}/{device}/status``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: Literal["online", "offline", "stopped"]
    device: str
    version: str | None = None
    voices: list[str] | None = None
    default_voice: str | None = None
    profile: str | None = Field(default=None, description="Hardware profile in use.")
    site_id: str | None = Field(default=None, description="Hermes site id.")
    groups: list[str] | None = Field(default=None, description=(
        "The groups the device follows (`mqtt.groups`; left out when none), also in the Last "
        "Will: what `tts-agent fleet` and `send --group --wait` learn membership from."))
    health_interval_s: float | None = Field(default=None, description=(
        "The device's `health.interval_s`: a health report older than a few of these means "
        "the device went silent."))
    ts: float | None = Field(default=None, description="Unix time of the change (s).")
    instance: str | None = Field(default=None, description=INSTANCE_DOC)


def to_payload(model: BaseModel) -> bytes:
    """Compact JSON of ``model``, unset optional fields left out."""
    return model.model_dump_json(exclude_none=True).encode("utf-8")
