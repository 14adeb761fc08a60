"""Putting a synchronized utterance's first sample at its time (player thread only).

:class:`Placer` runs the approach that :mod:`agent.audio.sync_start` describes, one step per
pass of the player's utterance loop (so ``stop``, shutdown and urgent items are seen between
steps): feed the running stream with silence, never more than what still separates it from
the start, and once the start is within one period and the audio is there, write the exact
silence left and let the audio follow. A device that takes frames faster than it plays them
(ALSA's ``null``) is waited on instead of fed, so the approach never spins.
"""

from __future__ import annotations

import time
from enum import Enum

from agent.audio.output import Output
from agent.audio.sync_start import SyncStart, frames_to_go, placed, prepare_s
from agent.audio.utterance import Utterance

__all__ = ["Placer", "Step"]


class Step(Enum):
    """What one approach step did."""

    PLACED = "placed"
    """The silence before the first sample is written; the audio goes next."""
    FED = "fed"
    """Silence was written; take another step at once."""
    WAIT = "wait"
    """Nothing to write yet: wait about a period."""
    MISSED = "missed"
    """Late, and ``audio.sync_late`` is ``skip``: the utterance does not play."""
    PAST = "past"
    """Joined late, and all of the utterance was past: nothing plays."""
    SKIPPING = "skipping"
    """Joining late: more of the utterance must come before it is past what was missed."""


class Placer:
    """The approach of one device's output to synchronized starts."""

    def __init__(self, output: Output, latency_ms: float) -> None:
        self._output = output
        self._latency_ms = latency_ms

    def prepare_s(self) -> float:
        """How long before its time a synchronized item is taken up: the device's buffer,
        the output latency beyond ALSA and a margin for opening the device."""
        device = self._output.device
        buffer_s = device.params.buffer_frames / device.params.rate if device else None
        return prepare_s(buffer_s, self._latency_ms)

    def to_go(self, sync: SyncStart) -> int:
        """:func:`frames_to_go` for the open device, now."""
        device = self._output.device
        if device is None:
            return 0
        queued = int(self._output.call(device.queued_frames)) if self._output.running else 0
        rate = device.params.rate
        return frames_to_go(sync.at, time.monotonic(), rate, queued,
                            round(self._latency_ms * rate / 1000))

    def advance(self, u: Utterance, sync: SyncStart) -> Step:
        """One step towards writing the audio of ``u``: PLACED once its start is placed and
        what a late join skips is dropped (its device is open)."""
        if not u.placed:
            step = self._step(u, sync)
            if step is not Step.PLACED:
                return step
        if u.skip_frames:
            u.skip_late()
            if u.skip_frames:
                return Step.PAST if u.source_done else Step.SKIPPING
        return Step.PLACED

    def _step(self, u: Utterance, sync: SyncStart) -> Step:
        period = self._output.params.period_frames
        to_go = self.to_go(sync)
        ready = u.pending_frames >= period or u.source_done
        if to_go > 2 * period or not ready:
            return self._feed(self._fill(u, to_go, period))
        place = placed(to_go, self._output.params.rate)
        if place.skip and sync.late == "skip":
            u.late_ms = place.late_ms
            return Step.MISSED
        if place.silence:
            self._output.write_silence(place.silence)
        u.skip_frames, u.late_ms, u.placed = place.skip, place.late_ms, True
        return Step.PLACED

    def started(self, u: Utterance, sync: SyncStart) -> dict[str, float]:
        """The facts of the placed start for the ``started`` event."""
        rate = self._output.params.rate
        return {"start_at_ms": round(sync.at_unix * 1000, 3), "late_by_ms": u.late_ms,
                "skipped_ms": round(u.skipped_frames * 1000 / rate, 2)}

    def _fill(self, u: Utterance, to_go: int, period: int) -> int:
        """Frames of silence for the next feed: whole periods (no plugin then holds a partial
        one back), the first time as many as the device's buffer and the latency beyond it
        hold (so that a device which paces fills up at once), never past the start."""
        if u.filled:
            return period
        u.filled = True
        params = self._output.params
        whole = params.buffer_frames + round(self._latency_ms * params.rate / 1000)
        return period * max(1, min(whole, to_go - 2 * period) // period)

    def _feed(self, frames: int) -> Step:
        """Write ``frames`` of silence; WAIT when the device took them at once without
        queueing them (it does not pace: waiting keeps the approach in real time)."""
        output = self._output
        device = output.device
        if device is None:
            return Step.WAIT
        before = int(output.call(device.queued_frames)) if output.running else 0
        began = time.monotonic()
        output.write_silence(frames)
        took = time.monotonic() - began
        queued = int(output.call(device.queued_frames))
        blocked = took >= frames / device.params.rate / 2
        return Step.FED if blocked or queued > before else Step.WAIT
