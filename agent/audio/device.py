"""The ALSA PCM: open it, negotiate its format, write to it, recover from underruns.

:func:`open_output` asks for the voice's rate and channels in S16_LE and reads back what the
device granted (:class:`DeviceParams`); the PCM is opened non-blocking, made in the PCM helper
process when the player passes its ``opener``. An underrun is counted and the data written again;
every other ALSA failure is a :class:`DeviceError`. Player thread only. Design:
docs/internals.md#the-alsa-pcm.
"""

from __future__ import annotations

import errno
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import alsaaudio

from agent.audio.convert import SUPPORTED_SAMPLE_FORMATS
from agent.audio.stats import DeviceInfo
from agent.logs import get_logger

__all__ = [
    "DEFAULT_BUFFER_PERIODS",
    "DeviceError",
    "DeviceParams",
    "OutputDevice",
    "default_period_frames",
    "open_output",
]

log = get_logger(__name__)

DEFAULT_BUFFER_PERIODS = 4
"""Periods per buffer when neither the settings nor a hardware profile say."""
_DEFAULT_PERIOD_S = 0.02
_STALL_MIN_S = 2.0
_MAX_XRUN_RETRIES = 16


def default_period_frames(rate: int) -> int:
    """About 20 ms at ``rate``, rounded to a power of two (512 at 22.05 kHz, 1024 at 48 kHz)."""
    return int(2 ** round(math.log2(rate * _DEFAULT_PERIOD_S)))


class DeviceError(Exception):
    """The audio device cannot be opened or failed while playing; the message says why."""


@dataclass(frozen=True, slots=True)
class DeviceParams:
    """What the opened device actually runs at."""

    name: str
    """The ALSA PCM name as configured."""
    rate: int
    """Frames per second (Hz)."""
    channels: int
    sample_format: str
    """ALSA sample format name, one of :data:`SUPPORTED_SAMPLE_FORMATS`."""
    period_frames: int
    buffer_frames: int

    @property
    def frame_bytes(self) -> int:
        """Bytes per frame."""
        return self.channels * SUPPORTED_SAMPLE_FORMATS[self.sample_format]

    @property
    def period_s(self) -> float:
        """One period in seconds."""
        return self.period_frames / self.rate

    def describe(self) -> DeviceInfo:
        """JSON-able summary for health reports and logs."""
        return DeviceInfo(name=self.name, rate=self.rate, channels=self.channels,
                          format=self.sample_format, period_frames=self.period_frames,
                          buffer_frames=self.buffer_frames)


def open_output(
    name: str,
    rate: int,
    channels: int,
    period_frames: int | None = None,
    buffer_periods: int | None = None,
    *,
    opener: Callable[..., Any] | None = None,
) -> OutputDevice:
    """Open PCM ``name`` for playback, asking for ``rate``/``channels`` in S16_LE.

    ``opener`` takes ``alsaaudio.PCM``'s keyword arguments and returns an object with
    its methods (default: ``alsaaudio.PCM`` itself). Raises :class:`DeviceError` when the
    device does not exist, is busy, refuses every configuration, does not answer, or
    grants a sample format we cannot write.
    """
    period = period_frames or default_period_frames(rate)
    periods = buffer_periods or DEFAULT_BUFFER_PERIODS
    make = opener or alsaaudio.PCM
    try:
        pcm = make(
            type=alsaaudio.PCM_PLAYBACK,
            mode=alsaaudio.PCM_NONBLOCK,
            device=name,
            rate=rate,
            channels=channels,
            format=alsaaudio.PCM_FORMAT_S16_LE,
            periodsize=period,
            periods=periods,
        )
    except alsaaudio.ALSAAudioError as exc:
        raise DeviceError(f"cannot open ALSA device {name!r}: {exc}") from exc
    try:
        info = pcm.info()
        params = DeviceParams(
            name=name,
            rate=int(info["rate"]),
            channels=int(info["channels"]),
            sample_format=str(info["format_name"]),
            period_frames=int(info["period_size"]),
            buffer_frames=int(info["buffer_size"]),
        )
    except (alsaaudio.ALSAAudioError, KeyError, TypeError, ValueError) as exc:
        pcm.close()
        raise DeviceError(f"cannot read the parameters of ALSA device {name!r}: {exc}") from exc
    problem = _check(params)
    if problem:
        pcm.close()
        raise DeviceError(f"ALSA device {name!r} {problem}")
    log.info("audio_device_opened", requested_rate=rate, requested_channels=channels,
             **params.describe())
    return OutputDevice(pcm, params, requested=(rate, channels))


def _check(params: DeviceParams) -> str | None:
    if params.sample_format not in SUPPORTED_SAMPLE_FORMATS:
        return (f"only takes {params.sample_format} samples; use a plug: device "
                f"(e.g. plughw:) so ALSA converts")
    if params.rate < 1000 or params.channels < 1:
        return f"granted an unusable configuration ({params.rate} Hz, {params.channels} ch)"
    if params.period_frames < 1 or params.buffer_frames < params.period_frames:
        return (f"granted unusable buffer sizes (period {params.period_frames}, "
                f"buffer {params.buffer_frames} frames)")
    return None


class OutputDevice:
    """An open playback PCM (player thread only)."""

    def __init__(self, pcm: Any, params: DeviceParams, requested: tuple[int, int]) -> None:
        self.params = params
        self.requested = requested
        """The (rate, channels) it was opened for; another voice format reopens it."""
        self.underruns = 0
        """Underruns (EPIPE) recovered since it was opened."""
        self._pcm = pcm
        self._pause = threading.Event()  # never set: a wait that is not a sleep()
        self._stall_s = max(_STALL_MIN_S, 4 * params.buffer_frames / params.rate)

    def write(self, data: bytes) -> None:
        """Write whole frames; waits while the buffer is full, rewrites after an underrun."""
        frame_bytes = self.params.frame_bytes
        view = memoryview(data)
        total = len(data) // frame_bytes
        done = 0
        last_progress = time.monotonic()
        retries = 0
        while done < total:
            try:
                written = self._pcm.write(view[done * frame_bytes:])
            except alsaaudio.ALSAAudioError as exc:
                raise DeviceError(f"ALSA device {self.params.name!r} failed: {exc}") from exc
            if written == -errno.EPIPE:
                self.underruns += 1
                retries += 1
                log.warning("audio_underrun", device=self.params.name, total=self.underruns)
                if retries > _MAX_XRUN_RETRIES:
                    raise DeviceError(f"ALSA device {self.params.name!r} keeps underrunning")
                continue
            if written < 0:
                raise DeviceError(
                    f"ALSA device {self.params.name!r} failed: {errno.errorcode.get(-written)}"
                )
            if written > 0:
                done += written
                last_progress = time.monotonic()
                continue
            if time.monotonic() - last_progress > self._stall_s:
                raise DeviceError(
                    f"ALSA device {self.params.name!r} stopped taking audio "
                    f"for {self._stall_s:.1f} s"
                )
            self._pause.wait(self.params.period_s / 2)

    def queued_frames(self) -> int:
        """Frames written but not yet played, as far as the device reports it."""
        try:
            avail = int(self._pcm.avail())
        except alsaaudio.ALSAAudioError as exc:
            raise DeviceError(f"ALSA device {self.params.name!r} failed: {exc}") from exc
        return max(0, self.params.buffer_frames - avail)

    def drop(self) -> None:
        """Stop at once, discarding what is buffered (the next write restarts the stream)."""
        try:
            self._pcm.drop()
        except alsaaudio.ALSAAudioError as exc:
            raise DeviceError(f"ALSA device {self.params.name!r} failed: {exc}") from exc

    def close(self) -> None:
        """Close the PCM; errors are logged, never raised (the device may be gone)."""
        try:
            self._pcm.close()
        except alsaaudio.ALSAAudioError as exc:
            log.warning("audio_device_close_failed", device=self.params.name, error=str(exc))
        log.info("audio_device_closed", device=self.params.name)
