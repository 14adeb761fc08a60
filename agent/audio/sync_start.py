"""A synchronized start: the moment an utterance's first sample must reach the speaker, and
the arithmetic that puts it there (docs/fleet.md#synchronized-group-speech).

Each device of a group speak with a start time ``at`` synthesizes ahead, holds the audio and
keeps its stream running on silence as the time nears; then the silence still to write is the
time left less what the device reports queued (``snd_pcm_delay``'s frames, through
:meth:`~agent.audio.device.OutputDevice.queued_frames`) and less ``audio.output_latency_ms``
(after ALSA: a USB or Bluetooth speaker's buffer, an amplifier's DSP). When a write returned
plays no part. A negative count means late by that much: the device joins at the sample due
now (``audio.sync_late = "join"``) or does not play (``"skip"``), never starting late from
the beginning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

__all__ = ["LatePolicy", "Placed", "SyncStart", "frames_to_go", "lead_ms", "placed", "prepare_s"]

LatePolicy = Literal["join", "skip"]


@dataclass(frozen=True, slots=True)
class SyncStart:
    """When the first sample is due, on both clocks, and what a late device does."""

    at_unix: float
    """Unix time (s) the first sample must reach the speaker: the clock devices share."""
    at: float
    """The same instant on ``time.monotonic()`` (converted once, when its play item is made)."""
    late: LatePolicy = "join"

    @classmethod
    def from_unix(cls, at_unix: float, late: LatePolicy = "join") -> SyncStart:
        """``at_unix`` converted through the two clocks as they are now."""
        return cls(at_unix, time.monotonic() + (at_unix - time.time()), late)

    def release_at(self, prepare_s: float) -> float:
        """Monotonic time at which the player takes the item up: ``prepare_s`` before ``at``,
        so that the stream runs (and the device's buffer is full) when the time comes."""
        return self.at - prepare_s


OPEN_MARGIN_S = 0.5
"""Time allowed to open a closed device before a synchronized start's approach (s)."""
UNKNOWN_BUFFER_S = 0.5
"""A device's buffer, for planning while it is closed (s; boards choose 0.05-0.4)."""


def prepare_s(buffer_s: float | None, latency_ms: float) -> float:
    """How long before its time a synchronized item is taken up: the device's buffer (None:
    closed, not known), the latency after it and :data:`OPEN_MARGIN_S`."""
    return (UNKNOWN_BUFFER_S if buffer_s is None else buffer_s) + latency_ms / 1000 \
        + OPEN_MARGIN_S


def lead_ms(first_audio_p95_s: float | None, buffer_s: float | None, latency_ms: float) -> int:
    """The least lead a controller should give this device: its first audio after a request
    arrives (p95 of recent ones; 1 s before there are any) and :func:`prepare_s`, rounded
    up to 10 ms. The controller adds the network's share."""
    first = 1.0 if first_audio_p95_s is None else first_audio_p95_s
    return int(-(-(first + prepare_s(buffer_s, latency_ms)) * 100 // 1) * 10)


def frames_to_go(at: float, now: float, rate: int, queued: int, latency: int) -> int:
    """Frames of silence to write now so that the next frame written plays at ``at``:
    the frames until then, less the ``queued`` frames ahead of it in the device and the
    ``latency`` frames after it. Negative: the next frame written plays that many frames
    late."""
    return round((at - now) * rate) - queued - latency


@dataclass(frozen=True, slots=True)
class Placed:
    """How the first sample is placed once :func:`frames_to_go` is within one write: the
    silence to write just before it, and the frames of the utterance to skip to join late."""

    silence: int
    skip: int
    late_ms: float
    """How late the device was when it placed the start (0 when on time)."""


def placed(to_go: int, rate: int) -> Placed:
    """The placement for ``to_go`` frames to go (negative: late)."""
    if to_go >= 0:
        return Placed(silence=to_go, skip=0, late_ms=0.0)
    return Placed(silence=0, skip=-to_go, late_ms=round(-to_go * 1000 / rate, 2))
