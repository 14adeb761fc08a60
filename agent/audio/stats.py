"""The audio player's counters and state, as the health report sees them.

:class:`PlayerStats` is what :meth:`agent.audio.player.AudioPlayer.stats` returns (the health
report's ``audio`` section, the liveness watch's ``busy_since`` and ``alive``).
:class:`PlayerBook` keeps the parts the player thread writes, under a lock of its own, so any
thread can take a consistent copy.

Imports no ALSA binding: the health code can import the types without pyalsaaudio.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal, TypedDict

from agent.outcomes import PLAYER_EVENTS, Outcome, PlayerEvent, Progress

__all__ = ["DeviceInfo", "PlayerBook", "PlayerState", "PlayerStats", "VolumeControl"]

PlayerState = Literal["ok", "degraded"]
VolumeControl = Literal["software", "mixer"]


class DeviceInfo(TypedDict):
    """What the open PCM runs at (:meth:`agent.audio.device.DeviceParams.describe`)."""

    name: str
    """The ALSA PCM name as configured."""
    rate: int
    """Frames per second (Hz)."""
    channels: int
    format: str
    """ALSA sample format name."""
    period_frames: int
    buffer_frames: int


class PlayerStats(TypedDict):
    """Counters and state of the player (keys in the order the health report shows them)."""

    pcm: str
    """The ALSA PCM the player opens (its settings' ``device``: ``audio.device``, or the
    hardware profile's, as :func:`agent.settings.effective_audio` resolved them)."""
    underruns: int
    """Underruns recovered, over every device opened since start."""
    device_errors: int
    """Times the device could not be opened or failed."""
    recovery_probes: int
    """Times a lost device was tried again (each probe writes a buffer of silence through it:
    the state is ``ok`` again only once one got through)."""
    seconds_played: float
    """Seconds of request audio written to the device (rounded to ms)."""
    started: int
    finished: int
    interrupted: int
    failed: int
    expired: int
    """Playback events of each kind so far."""
    internal_errors: int
    """Bugs caught by the player thread (it recovers and goes on)."""
    state: PlayerState
    """``degraded`` while the device cannot be opened or has failed."""
    reason: str | None
    """Why it is degraded; None when ``ok``."""
    device: DeviceInfo | None
    """The open PCM; None while closed (idle past ``audio.keep_open_s``, or failed)."""
    queue_depth: int
    """Items waiting to play."""
    playing: str | None
    """Request id of the utterance playing."""
    volume: float
    """Device volume, 0.0-1.0."""
    volume_control: VolumeControl
    """Where the device volume is applied: the ALSA mixer or software gain."""
    busy_since: float | None
    """``time.monotonic()`` when the ALSA call in progress began (stall detection)."""
    alive: bool
    """The player thread runs."""


class PlayerBook:
    """The counters and state the player thread keeps; every method takes the book's lock."""

    def __init__(self, pcm: str) -> None:
        self._pcm = pcm
        self._lock = threading.Lock()
        self._events: dict[PlayerEvent, int] = dict.fromkeys(PLAYER_EVENTS, 0)
        self._underruns = 0
        self._device_errors = 0
        self._recovery_probes = 0
        self._internal_errors = 0
        self._seconds_played = 0.0
        self._state: PlayerState = "ok"
        self._reason: str | None = None
        self._device: DeviceInfo | None = None
        self._playing: str | None = None
        self._busy_since: float | None = None
        self._volume_control: VolumeControl = "software"

    def count_event(self, kind: PlayerEvent) -> None:
        with self._lock:
            self._events[kind] += 1

    def count_device_error(self) -> None:
        with self._lock:
            self._device_errors += 1

    def count_recovery_probe(self) -> None:
        with self._lock:
            self._recovery_probes += 1

    def count_internal_error(self) -> None:
        with self._lock:
            self._internal_errors += 1

    def add_played(self, seconds: float) -> None:
        with self._lock:
            self._seconds_played += seconds

    def set_underruns(self, total: int) -> None:
        with self._lock:
            self._underruns = total

    def set_state(self, state: PlayerState, reason: str | None = None) -> PlayerState:
        """Record ``state`` (with its reason); returns the state before."""
        with self._lock:
            was = self._state
            self._state, self._reason = state, reason
            return was

    def set_device(self, info: DeviceInfo | None) -> None:
        with self._lock:
            self._device = info

    def set_playing(self, request_id: str | None) -> None:
        with self._lock:
            self._playing = request_id

    def set_volume_control(self, control: VolumeControl) -> None:
        with self._lock:
            self._volume_control = control

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Mark the span of one ALSA call (``busy_since``)."""
        with self._lock:
            self._busy_since = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self._busy_since = None

    def snapshot(self, *, queue_depth: int, volume: float, alive: bool) -> PlayerStats:
        """A copy of everything, with the parts the player itself holds."""
        with self._lock:
            events = self._events
            return PlayerStats(
                pcm=self._pcm, underruns=self._underruns, device_errors=self._device_errors,
                recovery_probes=self._recovery_probes,
                seconds_played=round(self._seconds_played, 3),
                started=events[Progress.STARTED], finished=events[Outcome.FINISHED],
                interrupted=events[Outcome.INTERRUPTED], failed=events[Outcome.FAILED],
                expired=events[Outcome.EXPIRED], internal_errors=self._internal_errors,
                state=self._state, reason=self._reason,
                device=DeviceInfo(**self._device) if self._device is not None else None,
                queue_depth=queue_depth, playing=self._playing, volume=volume,
                volume_control=self._volume_control, busy_since=self._busy_since,
                alive=alive,
            )
