"""The playback worker: a priority queue of utterances played through ALSA on one thread.

Integration contract (names other modules use)
----------------------------------------------
``PlayItem(request_id, *, priority=PRIORITY_NORMAL, volume=1.0, expires_at=None,
format=None, max_buffered_s=30.0)``
    One utterance. ``priority``: int, higher is more urgent; an item with priority
    >= ``PRIORITY_URGENT`` that is more urgent than the utterance playing interrupts
    it with a short fade (``audio.fade_ms``) and plays next. ``volume``: 0.0-1.0 for
    this request, applied in software. ``expires_at``: a ``time.monotonic()``
    deadline; an item still queued when it passes is dropped (``expired`` event),
    never played late. ``format``: the chunks' format if known (``voice.sample_rate``,
    16-bit mono), so the device is opened and prepared before the first chunk.
    The synthesis worker (any thread) feeds it while it plays:
    ``item.put(chunk: AudioChunk) -> bool`` (waits while the item already holds
    ``max_buffered_s`` unplayed; returns False once the item is over, so synthesis
    can stop), ``item.close()`` when done, or ``item.fail(reason)``. The first
    sentence plays while later ones are synthesized. ``item.wait(timeout)`` blocks
    until the final event; ``item.result`` holds it.

``AudioPlayer(settings: AudioSettings, on_event: Callable[[PlaybackEvent], None])``
    ``start()``; ``submit(item)`` (raises ``QueueFull`` when ``audio.queue_max`` items
    wait, ``PlayerClosed`` when not running; both are ``SubmitError`` with a readable
    message); ``stop(flush=False)`` cuts the utterance playing within one period and,
    with ``flush``, drops everything queued; ``set_volume(v)`` sets the device volume
    (ALSA mixer when ``audio.mixer`` is set, else software, ramped); ``close(timeout)``;
    ``stats()`` -> dict with ``state`` ("ok"/"degraded"), ``reason``, ``device``,
    ``queue_depth``, ``playing``, ``underruns``, ``device_errors``,
    ``seconds_played``, per-kind event counts, ``volume``, ``busy_since``, ``alive``.

``PlaybackEvent(kind, request_id, reason=None, audio_seconds=0.0)``
    kind is ``started`` (first frame written), ``finished`` (played out, drained from
    the device buffer), ``interrupted`` (preempted, stopped, flushed, shut down),
    ``failed`` (device error or ``item.fail``), ``expired``. Each item gets at most
    one ``started`` and exactly one of the other four.

Threads: ``on_event`` is called on the player thread, one event at a time. The
receiver must only hand the event on (e.g. put it on a bounded queue); blocking
there stalls playback. Every other method is safe from any thread.

Device handling
---------------
The device is opened for the first item (or at start, as a health probe) at the
voice's rate and channel count unless ``audio.rate``/``audio.channels`` force
others; whatever ALSA grants is reached in software (:mod:`agent.audio.convert`).
Each utterance may start with ``audio.lead_in_ms`` of silence; audio is written a
period at a time; gaps while synthesis catches up are filled with silence so the
device never underruns mid-utterance; an utterance is ``finished`` once a full
buffer of later frames has been written behind its last frame, so its end is
never cut. Between utterances the stream is stopped but the PCM stays open for
``audio.keep_open_s``. If the device cannot be opened or fails, the player closes
it, reports ``state: degraded`` with the reason, fails the affected requests with
that reason, retries every ``audio.reopen_interval_s`` and reports ``ok`` again
once it can play.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.audio.convert import StreamConverter, encode
from agent.audio.device import DeviceError, DeviceParams, OutputDevice, open_output
from agent.audio.format import AudioFormat
from agent.audio.item import (
    PRIORITY_URGENT,
    EventKind,
    PlaybackEvent,
    PlayItem,
)
from agent.audio.queue import PlayerClosed, PlayQueue, QueueFull, SubmitError
from agent.audio.volume import MixerVolume, SoftwareGain, fade_out_curve
from agent.logs import bind_request, get_logger
from agent.settings import AudioSettings

__all__ = [
    "AudioPlayer",
    "PlayItem",
    "PlaybackEvent",
    "PlayerClosed",
    "QueueFull",
    "SubmitError",
]

log = get_logger(__name__)

_PROBE_FORMAT = AudioFormat(rate=22050, width=2, channels=1)
"""Format of the start-up/recovery probe when no voice has played yet (Piper's usual)."""


@dataclass
class _Mark:
    """An item whose last frame was written at device position ``end``."""

    end: int
    item: PlayItem
    audio_seconds: float


@dataclass
class _Utterance:
    """Player-thread state of the item being played."""

    item: PlayItem
    epoch: int
    converter: StreamConverter | None = None
    pending: deque[np.ndarray] = field(default_factory=deque)
    pending_frames: int = 0
    audio_frames: int = 0
    started: bool = False
    source_done: bool = False
    waiting_since: float = field(default_factory=time.monotonic)

    def add(self, frames: np.ndarray) -> None:
        if len(frames):
            self.pending.append(frames)
            self.pending_frames += len(frames)

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


class AudioPlayer:
    """Plays :class:`PlayItem` s one after another on a dedicated thread (see module doc)."""

    def __init__(
        self,
        settings: AudioSettings,
        on_event: Callable[[PlaybackEvent], None],
    ) -> None:
        self._settings = settings
        self._on_event = on_event
        self._queue = PlayQueue(settings.queue_max)
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Shared state, guarded by self._lock.
        self._closing = False
        self._stop_epoch = 0
        self._volume = settings.volume
        self._state = "ok"
        self._reason: str | None = None
        self._counts: dict[str, Any] = {
            "underruns": 0, "device_errors": 0, "seconds_played": 0.0,
            "started": 0, "finished": 0, "interrupted": 0, "failed": 0, "expired": 0,
            "internal_errors": 0,
        }
        self._device_info: dict[str, Any] | None = None
        self._playing: str | None = None
        self._busy_since: float | None = None
        self._volume_control = "software"
        self._reports: deque[PlaybackEvent] = deque()  # settled off-thread, told on-thread
        # Player-thread state.
        self._device: OutputDevice | None = None
        self._position = 0  # frames written since the device was opened
        self._running = False  # frames written since the last open/drop
        self._underruns_before = 0  # underruns of devices already closed
        self._marks: deque[_Mark] = deque()
        self._idle_since = time.monotonic()
        self._retry_at: float | None = None
        self._seen_epoch = 0
        self._last_format = _PROBE_FORMAT
        self._gain = SoftwareGain(settings.volume, settings.volume_ramp_ms / 1000)
        self._applied_volume = settings.volume
        self._mixer: MixerVolume | None = None
        self._current: PlayItem | None = None

    # -- public API (any thread) -----------------------------------------------------------

    def start(self) -> None:
        """Start the player thread; it probes the device at once (see :meth:`stats`)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("AudioPlayer.start() called twice")
            self._thread = threading.Thread(target=self._run, name="audio-player", daemon=True)
            self._thread.start()

    def submit(self, item: PlayItem) -> None:
        """Queue ``item`` (any thread). Raises :class:`QueueFull` or :class:`PlayerClosed`."""
        if not isinstance(item, PlayItem):
            raise TypeError("submit() takes a PlayItem")
        with self._lock:
            if self._thread is None or self._closing:
                raise PlayerClosed(
                    f"audio player is not running; request {item.request_id} rejected"
                )
            if item._wake is not None or item.result is not None:
                raise ValueError(f"item {item.request_id} was already submitted")
            self._queue.push(item)
            item._bind(self._wake.set)
        self._wake.set()

    def stop(self, flush: bool = False) -> None:
        """Cut the utterance playing within one period (any thread).

        With ``flush`` every queued item is dropped too (``interrupted``, reason
        "flushed"). Items submitted after this call are not affected.
        """
        with self._lock:
            self._stop_epoch += 1
            flushed = self._queue.take_all() if flush else []
            for item in flushed:
                event = PlaybackEvent("interrupted", item.request_id, "flushed by stop")
                if item._settle(event):
                    self._reports.append(event)
        self._wake.set()

    def set_volume(self, volume: float) -> None:
        """Set the device volume 0.0-1.0 (any thread); takes effect with a smooth ramp."""
        if not 0.0 <= volume <= 1.0:
            raise ValueError(f"volume {volume} outside 0.0-1.0")
        with self._lock:
            self._volume = volume
        self._wake.set()

    def close(self, timeout: float | None = 5.0) -> bool:
        """Cut playback, drop the queue, close the device and end the thread (any thread).

        Returns True when the thread has ended within ``timeout``.
        """
        with self._lock:
            self._closing = True
            thread = self._thread
            for item in self._queue.take_all():
                event = PlaybackEvent("interrupted", item.request_id, "player closed")
                if item._settle(event):
                    self._reports.append(event)
        self._wake.set()
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def stats(self) -> dict[str, Any]:
        """Counters and state for health reports (any thread)."""
        with self._lock:
            data = dict(self._counts)
            data["seconds_played"] = round(data["seconds_played"], 3)
            data.update(
                state=self._state,
                reason=self._reason,
                device=dict(self._device_info) if self._device_info else None,
                queue_depth=len(self._queue),
                playing=self._playing,
                volume=self._volume,
                volume_control=self._volume_control,
                busy_since=self._busy_since,
                alive=self._thread is not None and self._thread.is_alive(),
            )
        return data

    # -- player thread ---------------------------------------------------------------------

    def _run(self) -> None:
        log.info("audio_player_started", device=self._settings.device)
        self._setup_volume()
        self._probe()
        while True:
            try:
                if not self._step():
                    break
            except Exception as exc:  # a bug must not take the audio path down for good
                log.exception("audio_player_error")
                with self._lock:
                    self._counts["internal_errors"] += 1
                self._abandon(f"internal error in the audio player: {exc}")
                self._wake.wait(min(1.0, self._settings.reopen_interval_s))
        self._shutdown()
        log.info("audio_player_stopped")

    def _step(self) -> bool:
        """One pass of the idle loop; False when the player must end."""
        self._wake.clear()
        self._emit_reports()
        if self._is_closing():
            return False
        self._apply_volume()
        self._expire_queued()
        try:
            if self._stop_epoch != self._seen_epoch:
                self._seen_epoch = self._stop_epoch
                self._cut("stopped")
            item = self._queue.pop()
            if item is not None:
                self._play(item)
                return True
            if self._marks:  # push the end of the last utterance out of the buffer
                self._write_silence(self._period())
                return True
            if self._running and self._device is not None:
                self._call(self._device.drop)
                self._running = False
                self._idle_since = time.monotonic()
        except DeviceError as exc:
            self._device_failed(str(exc))
            return True
        self._wake.wait(self._idle_housekeeping())
        return True

    def _idle_housekeeping(self) -> float | None:
        """Retry a lost device, close an idle one; returns seconds until the next deadline."""
        if self._retry_at is not None and time.monotonic() >= self._retry_at:
            self._probe()
        now = time.monotonic()
        deadlines = []
        if self._device is not None:
            left = self._idle_since + self._settings.keep_open_s - now
            if left > 0:
                deadlines.append(left)
            else:
                self._close_device()
        if self._retry_at is not None:
            deadlines.append(max(0.0, self._retry_at - now))
        return min(deadlines) if deadlines else None

    def _play(self, item: PlayItem) -> None:
        with self._lock:
            self._playing = item.request_id
        self._current = item
        utterance = _Utterance(item, self._seen_epoch)
        try:
            with bind_request(item.request_id):
                self._play_utterance(utterance)
        except DeviceError as exc:
            self._device_failed(str(exc))
        except Exception as exc:
            self._finish(item, "failed", f"internal error in the audio player: {exc}")
            raise
        finally:
            self._current = None
            with self._lock:
                self._playing = None

    def _play_utterance(self, u: _Utterance) -> None:
        item = u.item
        if item._expired(time.monotonic()):
            self._finish(item, "expired", "deadline passed before playback")
            return
        if item.format is not None and not self._prepare(u, item.format):
            return
        log.debug("utterance_begin", priority=item.priority)
        while item.result is None:  # settled elsewhere: device failure
            self._wake.clear()
            self._emit_reports()
            self._apply_volume()
            self._expire_queued()
            ending = self._interruption(u)
            if ending is not None:
                self._end(u, *ending)
                return
            period = self._period()
            if u.pending_frames < period and not u.source_done and self._pull(u):
                continue
            if u.converter is None and u.pending_frames == 0 and not u.source_done:
                pass  # no format yet: wait for the first chunk
            elif u.pending_frames >= period or (u.source_done and u.pending_frames):
                self._write_audio(u, u.take(period))
                continue
            elif u.source_done:
                self._utterance_written(u)
                return
            if time.monotonic() - u.waiting_since > self._settings.producer_timeout_s:
                reason = f"no audio from synthesis for {self._settings.producer_timeout_s:g} s"
                self._end(u, "failed", reason, "fade")
                return
            self._keep_fed(u)
            self._wake.wait(self._wait_step())

    def _pull(self, u: _Utterance) -> bool:
        """Take the next chunk from the producer; True when there was progress."""
        item = u.item
        chunk = item._take()
        if chunk is not None:
            u.waiting_since = time.monotonic()
            if u.converter is None and not self._prepare(u, chunk.format):
                return True  # the item failed; the loop ends on item.result
            if u.converter is not None:
                u.add(u.converter.push(chunk))
            return True
        closed, _failure, waiting = item._source_state()
        if closed and not waiting:
            if u.converter is not None:
                u.add(u.converter.flush())
            u.source_done = True
            return True
        return False

    def _prepare(self, u: _Utterance, fmt: AudioFormat) -> bool:
        """Open the device for ``fmt`` and write the lead-in; False when the item failed."""
        try:
            device = self._ensure_device(fmt)
        except DeviceError as exc:
            with self._lock:
                self._counts["device_errors"] += 1
            self._finish(u.item, "failed", str(exc))
            return False
        params = device.params
        u.converter = StreamConverter(params.rate, params.channels)
        lead_in = round(params.rate * self._settings.lead_in_ms / 1000)
        if lead_in and not self._running:
            self._write_silence(lead_in)
        return True

    def _interruption(self, u: _Utterance) -> tuple[EventKind, str, str] | None:
        """Why the utterance must end now, as (event kind, reason, "fade"|"cut")."""
        if self._is_closing():
            return "interrupted", "player closed", "cut"
        if self._stop_epoch != u.epoch:
            self._seen_epoch = self._stop_epoch
            return "interrupted", "stopped", "cut"
        _closed, failure, _waiting = u.item._source_state()
        if failure is not None:
            return "failed", failure, "fade"
        head = self._queue.head()
        urgent = head is not None and head.priority >= PRIORITY_URGENT
        if head is not None and urgent and head.priority > u.item.priority:
            return "interrupted", f"preempted by {head.request_id}", "fade"
        return None

    def _end(self, u: _Utterance, kind: EventKind, reason: str, how: str) -> None:
        if how == "cut":
            self._finish(u.item, kind, reason, u)
            self._cut(reason)
            return
        if u.started and self._device is not None and u.converter is not None:
            self._fade_out(u)
        self._finish(u.item, kind, reason, u)

    def _fade_out(self, u: _Utterance) -> None:
        """Write the next ``fade_ms`` of the utterance fading to silence."""
        params = self._params()
        want = round(params.rate * self._settings.fade_ms / 1000)
        while u.pending_frames < want and u.converter is not None:
            chunk = u.item._take()
            if chunk is None:
                break
            u.add(u.converter.push(chunk))
        block = u.take(min(want, u.pending_frames))
        if len(block):
            self._write_audio(u, block, fade_out_curve(want)[: len(block)])

    def _utterance_written(self, u: _Utterance) -> None:
        """All audio is written: finished once it has been pushed out of the buffer."""
        if not u.started:
            self._finish(u.item, "finished", None, u)
            return
        self._marks.append(_Mark(self._position, u.item, self._audio_seconds(u)))
        self._fire_marks()

    # -- writing ---------------------------------------------------------------------------

    def _write_audio(self, u: _Utterance, block: np.ndarray,
                     shape: np.ndarray | None = None) -> None:
        params = self._params()
        gains = self._gain.advance(len(block), params.rate)
        gains = gains * u.item.volume
        if shape is not None:
            gains = gains * shape
        out = block * (gains[:, None] if isinstance(gains, np.ndarray) else np.float32(gains))
        self._write(out)
        u.audio_frames += len(block)
        u.waiting_since = time.monotonic()
        with self._lock:
            self._counts["seconds_played"] += len(block) / params.rate
        if not u.started:
            u.started = True
            self._deliver(PlaybackEvent("started", u.item.request_id, None,
                                        self._audio_seconds(u)))

    def _write_silence(self, frames: int) -> None:
        params = self._params()
        self._gain.advance(frames, params.rate)
        self._write(np.zeros((frames, params.channels), dtype=np.float32))

    def _write(self, frames: np.ndarray) -> None:
        device = self._require_device()
        data = encode(frames, device.params.sample_format)
        self._call(device.write, data)
        self._position += len(frames)
        self._running = True
        if self._retry_at is not None:
            self._set_ok()
        with self._lock:
            self._counts["underruns"] = self._underruns_before + device.underruns
        self._fire_marks()

    def _keep_fed(self, u: _Utterance) -> None:
        """While waiting for the producer, keep a running stream from underrunning.

        What the utterance already has goes out first, the resampler's tail
        included, so a gap falls between sentences, never inside one.
        """
        device = self._device
        if device is None or not self._running:
            return
        period = device.params.period_frames
        if self._call(device.queued_frames) >= 2 * period:
            return
        if u.converter is not None:
            u.add(u.converter.flush())
        if u.pending_frames:
            self._write_audio(u, u.take(u.pending_frames))
        else:
            self._write_silence(period)

    def _fire_marks(self) -> None:
        device = self._device
        if device is None:
            return
        played = self._position - device.params.buffer_frames
        while self._marks and self._marks[0].end <= played:
            mark = self._marks.popleft()
            self._finish(mark.item, "finished", None, audio_seconds=mark.audio_seconds)

    def _cut(self, reason: str) -> None:
        """Stop the device at once; utterances still in its buffer are interrupted."""
        while self._marks:
            mark = self._marks.popleft()
            self._finish(mark.item, "interrupted", reason, audio_seconds=mark.audio_seconds)
        if self._device is not None and self._running:
            self._call(self._device.drop)
        self._running = False
        self._idle_since = time.monotonic()

    # -- device lifecycle ------------------------------------------------------------------

    def _ensure_device(self, fmt: AudioFormat) -> OutputDevice:
        want = (self._settings.rate or fmt.rate, self._settings.channels or fmt.channels)
        self._last_format = fmt
        device = self._device
        if device is not None and device.requested != want and not self._running:
            self._close_device()
            device = None
        if device is None:
            device = self._open(want)
        return device

    def _open(self, want: tuple[int, int]) -> OutputDevice:
        settings = self._settings
        try:
            device: OutputDevice = self._call(
                open_output, settings.device, want[0], want[1],
                settings.period_frames, settings.buffer_periods,
            )
        except DeviceError as exc:
            self._set_degraded(str(exc))
            raise
        self._device = device
        self._position = 0
        self._running = False
        self._idle_since = time.monotonic()
        with self._lock:
            self._device_info = device.params.describe()
        return device

    def _probe(self) -> None:
        """Open the device and play one period of silence: proves the path works."""
        fmt = self._last_format
        try:
            device = self._ensure_device(fmt)
            if not self._running:
                self._write_silence(device.params.period_frames)
                self._call(device.drop)
                self._running = False
        except DeviceError as exc:
            self._device_failed(str(exc), count=False)
            return
        self._set_ok()

    def _close_device(self) -> None:
        device = self._device
        if device is None:
            return
        self._device = None
        self._running = False
        self._underruns_before += device.underruns
        self._call(device.close)
        with self._lock:
            self._device_info = None

    def _device_failed(self, reason: str, count: bool = True) -> None:
        """The device failed: close it, fail what is in its buffer, retry later."""
        log.warning("audio_device_failed", reason=reason)
        self._close_device()
        if count:
            with self._lock:
                self._counts["device_errors"] += 1
        self._set_degraded(reason)  # before the events: their receivers may read stats()
        while self._marks:
            mark = self._marks.popleft()
            self._finish(mark.item, "failed", reason, audio_seconds=mark.audio_seconds)
        if self._current is not None:
            self._finish(self._current, "failed", reason)

    def _set_degraded(self, reason: str) -> None:
        self._retry_at = time.monotonic() + self._settings.reopen_interval_s
        with self._lock:
            was = self._state
            self._state, self._reason = "degraded", reason
        if was != "degraded":
            log.warning("audio_degraded", reason=reason)

    def _set_ok(self) -> None:
        self._retry_at = None
        with self._lock:
            was = self._state
            self._state, self._reason = "ok", None
        if was != "ok":
            log.info("audio_recovered", device=self._settings.device)

    def _require_device(self) -> OutputDevice:
        if self._device is None:
            raise DeviceError("audio device is not open")
        return self._device

    def _params(self) -> DeviceParams:
        return self._require_device().params

    def _period(self) -> int:
        if self._device is not None:
            return int(self._device.params.period_frames)
        return 1

    def _wait_step(self) -> float:
        """How long to wait for the producer before checking the stream again (s)."""
        if self._device is not None:
            return float(self._device.params.period_s)
        return 0.02

    def _audio_seconds(self, u: _Utterance) -> float:
        rate = u.converter.rate if u.converter is not None else 1
        return u.audio_frames / rate

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an ALSA call, recording when it started (for stall detection)."""
        with self._lock:
            self._busy_since = time.monotonic()
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._busy_since = None

    # -- volume ----------------------------------------------------------------------------

    def _setup_volume(self) -> None:
        if self._settings.mixer is None:
            return
        try:
            self._mixer = MixerVolume(self._settings.mixer, self._settings.mixer_device)
            self._mixer.set(self._settings.volume)
        except DeviceError as exc:
            log.warning("audio_mixer_unavailable", reason=str(exc))
            self._mixer = None
            return
        self._gain = SoftwareGain(1.0, self._settings.volume_ramp_ms / 1000)
        with self._lock:
            self._volume_control = "mixer"

    def _apply_volume(self) -> None:
        with self._lock:
            volume = self._volume
        if volume == self._applied_volume:
            return
        self._applied_volume = volume
        if self._mixer is not None:
            try:
                self._mixer.set(volume)
                return
            except DeviceError as exc:
                log.warning("audio_mixer_failed", reason=str(exc))
                self._mixer.close()
                self._mixer = None
                self._gain = SoftwareGain(1.0, self._settings.volume_ramp_ms / 1000)
                with self._lock:
                    self._volume_control = "software"
        self._gain.set(volume)

    # -- events ----------------------------------------------------------------------------

    def _finish(self, item: PlayItem, kind: EventKind, reason: str | None,
                u: _Utterance | None = None, audio_seconds: float | None = None) -> None:
        if audio_seconds is None:
            audio_seconds = self._audio_seconds(u) if u is not None else 0.0
        event = PlaybackEvent(kind, item.request_id, reason, round(audio_seconds, 3))
        if item._settle(event):
            self._deliver(event)

    def _deliver(self, event: PlaybackEvent) -> None:
        with self._lock:
            self._counts[event.kind] += 1
        log.info("playback_event", kind=event.kind, request_id=event.request_id,
                 reason=event.reason, audio_seconds=event.audio_seconds)
        try:
            self._on_event(event)
        except Exception:
            log.exception("playback_event_handler_failed", kind=event.kind)

    def _emit_reports(self) -> None:
        while self._reports:
            self._deliver(self._reports.popleft())

    def _expire_queued(self) -> None:
        for item in self._queue.take_expired(time.monotonic()):
            self._finish(item, "expired", "deadline passed before playback")

    def _is_closing(self) -> bool:
        with self._lock:
            return self._closing

    def _abandon(self, reason: str) -> None:
        """After an unexpected error: fail what is in flight and start clean."""
        if self._current is not None:
            self._finish(self._current, "failed", reason)
        while self._marks:
            mark = self._marks.popleft()
            self._finish(mark.item, "failed", reason, audio_seconds=mark.audio_seconds)
        try:
            self._close_device()
        except Exception:
            log.exception("audio_device_close_error")
            self._device = None

    def _shutdown(self) -> None:
        while self._marks:
            mark = self._marks.popleft()
            self._finish(mark.item, "interrupted", "player closed",
                         audio_seconds=mark.audio_seconds)
        self._emit_reports()
        for item in self._queue.take_all():
            self._finish(item, "interrupted", "player closed")
        self._close_device()
        if self._mixer is not None:
            self._mixer.close()
