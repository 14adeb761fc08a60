"""The player's output: the PCM's lifecycle and everything written to it (player thread only).

The device is opened for the first item at the voice's format (converted in software to what ALSA
grants), written a period at a time with silence filling gaps, and an utterance is ``finished``
once a buffer of later frames is behind it. A failed device is reported ``degraded``, its
utterances failed and retried; it is ``ok`` again only once a write got through. The PCM lives in
a helper process (:mod:`agent.audio.pcm_host`). Design: docs/internals.md#the-players-output.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from agent.audio.convert import StreamConverter, encode
from agent.audio.device import DeviceError, DeviceParams, OutputDevice, open_output
from agent.audio.events import PlayerEvents
from agent.audio.format import AudioFormat
from agent.audio.pcm_host import PcmHost
from agent.audio.stats import PlayerBook
from agent.audio.utterance import Mark, Utterance
from agent.audio.volume import PlayerVolume
from agent.logs import get_logger
from agent.outcomes import Outcome

if TYPE_CHECKING:
    from agent.outcomes import PlayerOutcome
    from agent.settings import AudioSettings

__all__ = ["Output"]

log = get_logger(__name__)

_PROBE_FORMAT = AudioFormat(rate=22050, width=2, channels=1)
"""Format of the start-up/recovery probe when no voice has played yet (Piper's usual)."""


class Output:
    """The open PCM (or none), its write position and the utterances still in its buffer."""

    def __init__(self, settings: AudioSettings, book: PlayerBook, volume: PlayerVolume,
                 events: PlayerEvents) -> None:
        self._settings = settings
        self._book = book
        self._volume = volume
        self._events = events
        self.device: OutputDevice | None = None
        self.running = False
        """Frames have been written since the last open or drop (the stream runs)."""
        self._position = 0  # frames written since the device was opened
        self._run_frames = 0  # frames written since the stream last started (open or drop)
        self._underruns_before = 0  # underruns of devices already closed
        self._marks: deque[Mark] = deque()
        self._idle_since = time.monotonic()
        self._retry_at: float | None = None
        self._last_format = _PROBE_FORMAT
        self._host = PcmHost(settings.device_timeout_s)

    @property
    def has_marks(self) -> bool:
        """Utterances are written but not yet played out."""
        return bool(self._marks)

    # -- writing ---------------------------------------------------------------------------

    def start_utterance(self, u: Utterance, params: DeviceParams) -> None:
        """Give ``u`` its converter to the open device's ``params``; write the lead-in."""
        u.converter = StreamConverter(params.rate, params.channels)
        lead_in = round(params.rate * self._settings.lead_in_ms / 1000)
        if lead_in and not self.running and u.item.sync is None:
            self.write_silence(lead_in)

    def write_audio(self, u: Utterance, block: np.ndarray, shape: np.ndarray | None = None) -> bool:
        """Write frames of ``u`` through the device and request gains (and ``shape``, a
        fade); True when these were its first frames."""
        params = self.params
        gains = self._volume.gain.advance(len(block), params.rate)
        gains = gains * u.item.volume
        if shape is not None:
            gains = gains * shape
        out = block * (gains[:, None] if isinstance(gains, np.ndarray) else np.float32(gains))
        self._write(out)
        u.audio_frames += len(block)
        u.waiting_since = time.monotonic()
        self._book.add_played(len(block) / params.rate)
        first = not u.started
        u.started = True
        return first

    def write_silence(self, frames: int) -> None:
        params = self.params
        self._volume.gain.advance(frames, params.rate)
        self._write(np.zeros((frames, params.channels), dtype=np.float32))

    def needs_feed(self) -> bool:
        """A running stream is close to underrunning (less than two periods queued)."""
        device = self.device
        if device is None or not self.running:
            return False
        return bool(self.call(device.queued_frames) < 2 * device.params.period_frames)

    def mark_end(self, u: Utterance) -> None:
        """All of ``u`` is written: it finishes once it has been pushed out of the buffer."""
        self._marks.append(Mark(self._position, u.item, u.audio_seconds))
        self._fire_marks()

    def settle_marks(self, kind: PlayerOutcome, reason: str) -> None:
        """End every utterance still in the buffer with ``kind``."""
        while self._marks:
            mark = self._marks.popleft()
            self._events.finish(mark.item, kind, reason, mark.audio_seconds)

    def cut(self, reason: str) -> None:
        """Stop the device at once; utterances still in its buffer are interrupted."""
        self.settle_marks(Outcome.INTERRUPTED, reason)
        if self.device is not None and self.running:
            self.call(self.device.drop)
        self._stopped()

    def stop_stream(self) -> None:
        """Between utterances: stop a running stream, keep the PCM open."""
        if self.running and self.device is not None:
            self.call(self.device.drop)
            self._stopped()

    def _stopped(self) -> None:
        self.running = False
        self._run_frames = 0
        self._idle_since = time.monotonic()

    def _write(self, frames: np.ndarray) -> None:
        device = self._require_device()
        data = encode(frames, device.params.sample_format)
        self.call(device.write, data)
        self._position += len(frames)
        self._run_frames += len(frames)
        self.running = True
        if self._retry_at is not None and self._run_frames > device.params.buffer_frames:
            self._set_ok()  # frames have left the buffer: the write got through
        self._book.set_underruns(self._underruns_before + device.underruns)
        self._fire_marks()

    def _fire_marks(self) -> None:
        device = self.device
        if device is None:
            return
        played = self._position - device.params.buffer_frames
        while self._marks and self._marks[0].end <= played:
            mark = self._marks.popleft()
            self._events.finish(mark.item, Outcome.FINISHED, None, mark.audio_seconds)

    # -- device lifecycle ------------------------------------------------------------------

    def ensure(self, fmt: AudioFormat) -> OutputDevice:
        """The device, opened (or reopened while stopped) for ``fmt``."""
        want = (self._settings.rate or fmt.rate, self._settings.channels or fmt.channels)
        self._last_format = fmt
        device = self.device
        if device is not None and device.requested != want and not self.running:
            self.close()
            device = None
        if device is None:
            device = self._open(want)
        return device

    def _open(self, want: tuple[int, int]) -> OutputDevice:
        settings = self._settings
        try:
            device: OutputDevice = self.call(
                open_output, settings.device, want[0], want[1],
                settings.period_frames, settings.buffer_periods, opener=self._host.open_pcm,
            )
        except DeviceError as exc:
            self._set_degraded(str(exc))
            raise
        self.device = device
        self._position = 0
        self._stopped()
        self._book.set_device(device.params.describe())
        return device

    def probe(self) -> None:
        """Open the device and write silence through it.

        At start one period (the device opens and takes frames). While degraded (a recovery
        probe) a buffer and a period more, so that frames leave the buffer: only a write that
        got through makes the device ``ok`` again (:meth:`_write`).
        """
        recovering = self._retry_at is not None
        if recovering:
            self._book.count_recovery_probe()
        try:
            device = self.ensure(self._last_format)
            if not self.running:
                params = device.params
                self.write_silence(params.period_frames
                                   + (params.buffer_frames if recovering else 0))
                self.call(device.drop)
                self._stopped()
        except DeviceError as exc:
            self.fail(str(exc), count=False)
            return
        if not recovering:
            self._set_ok()

    def housekeeping(self) -> float | None:
        """While idle: retry a lost device, close an idle one; seconds until the next
        deadline (None: none)."""
        if self._retry_at is not None and time.monotonic() >= self._retry_at:
            self.probe()
        now = time.monotonic()
        deadlines = []
        if self.device is not None:
            left = self._idle_since + self._settings.keep_open_s - now
            if left > 0:
                deadlines.append(left)
            else:
                self.close()
        if self._retry_at is not None:
            deadlines.append(max(0.0, self._retry_at - now))
        return min(deadlines) if deadlines else None

    def close(self) -> None:
        device = self.device
        if device is None:
            return
        self.device = None
        self.running = False
        self._underruns_before += device.underruns
        self.call(device.close)
        self._book.set_device(None)

    def shutdown(self) -> None:
        """At the player's end: close the device and end its helper process."""
        try:
            self.close()
        finally:
            self.call(self._host.shutdown)

    def reset(self) -> None:
        """After an unexpected error: close the device, whatever state it is in."""
        try:
            self.close()
        except Exception:
            log.exception("audio_device_close_error")
            self.device = None

    def fail(self, reason: str, count: bool = True) -> None:
        """The device failed: close it, report degraded, fail what is in its buffer."""
        log.warning("audio_device_failed", reason=reason)
        self.close()
        if count:
            self._book.count_device_error()
        self._set_degraded(reason)  # before the events: their receivers may read stats()
        self.settle_marks(Outcome.FAILED, reason)

    def _set_degraded(self, reason: str) -> None:
        self._retry_at = time.monotonic() + self._settings.reopen_interval_s
        if self._book.set_state("degraded", reason) != "degraded":
            log.warning("audio_degraded", reason=reason)

    def _set_ok(self) -> None:
        self._retry_at = None
        if self._book.set_state("ok") != "ok":
            log.info("audio_recovered", device=self._settings.device)

    # -- helpers ---------------------------------------------------------------------------

    def _require_device(self) -> OutputDevice:
        if self.device is None:
            raise DeviceError("audio device is not open")
        return self.device

    @property
    def params(self) -> DeviceParams:
        return self._require_device().params

    def period(self) -> int:
        """Frames per period of the open device (1 while none is open)."""
        return int(self.device.params.period_frames) if self.device is not None else 1

    def wait_step(self) -> float:
        """How long to wait for the producer before checking the stream again (s)."""
        return float(self.device.params.period_s) if self.device is not None else 0.02

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run an ALSA call, recording when it started (for stall detection)."""
        with self._book.busy():
            return fn(*args, **kwargs)

