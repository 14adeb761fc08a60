"""The playback worker: a priority queue of utterances (:class:`~agent.audio.item.PlayItem`)
played through ALSA on one thread.

:class:`AudioPlayer` owns the thread, the loops and the state other threads touch; it reports
each item's ``started`` and exactly one final outcome through the pipeline's
:class:`~agent.outcomes.Reporter`, on the player thread (the reporter only hands it on).
Every other method is safe from any thread. The contract (priorities, interruption, expiry,
feeding an item while it plays) and the parts: docs/internals.md#the-player.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from agent.audio.device import DeviceError
from agent.audio.events import PlayerEvents
from agent.audio.format import AudioFormat
from agent.audio.item import PlaybackEvent, PlayItem
from agent.audio.output import Output
from agent.audio.placement import Placer, Step
from agent.audio.queue import PlayerClosed, PlayQueue, QueueFull, SubmitError
from agent.audio.stats import PlayerBook, PlayerStats
from agent.audio.sync_start import SyncStart
from agent.audio.utterance import CLOSED, STOPPED, Ending, Utterance, interruption, starved
from agent.audio.volume import PlayerVolume, fade_out_curve
from agent.logs import bind_request, get_logger
from agent.outcomes import Outcome, Progress, Reporter
from agent.settings import AudioSettings

__all__ = ["AudioPlayer", "PlayItem", "PlaybackEvent", "PlayerClosed", "PlayerStats",
           "QueueFull", "SubmitError"]

log = get_logger(__name__)


class AudioPlayer:
    """Plays :class:`PlayItem` s one after another on a dedicated thread (see module doc)."""

    def __init__(
        self,
        settings: AudioSettings,
        reporter: Reporter,
    ) -> None:
        self._settings = settings
        self._queue = PlayQueue(settings.queue_max)
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Shared state, guarded by self._lock.
        self._closing = False
        self._stop_epoch = 0
        self._volume = settings.volume
        # Thread-safe parts of their own.
        self._book = PlayerBook(settings.device)
        self._events = PlayerEvents(reporter, self._book)
        # Player-thread state.
        self._device_volume = PlayerVolume(settings)
        self._output = Output(settings, self._book, self._device_volume, self._events)
        self._placer = Placer(self._output, settings.output_latency_ms)
        self._seen_epoch = 0
        self._current: PlayItem | None = None
        self._probed = threading.Event()

    # -- public API (any thread) -----------------------------------------------------------

    def start(self) -> None:
        """Start the player thread; it probes the device at once (see :meth:`stats`)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("AudioPlayer.start() called twice")
            self._thread = threading.Thread(target=self._run, name="audio-player", daemon=True)
            self._thread.start()

    def wait_probed(self, timeout: float) -> PlayerStats | None:
        """The stats once the start-up probe of the device is done (``state`` ``degraded`` and
        its ``reason``: the device did not open), or None when it is not done within
        ``timeout`` (any thread). ``tts-agent say`` asks before it loads a voice."""
        return self.stats() if self._probed.wait(timeout) else None

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

    def has_room(self, priority: int, timeout: float = 0.0) -> bool:
        """Whether :meth:`submit` would queue an item of ``priority``, waiting up to
        ``timeout`` for room (any thread)."""
        return self._queue.wait_room(priority, timeout)

    def stop(self, flush: bool = False) -> None:
        """Cut the utterance playing within one period (any thread).

        With ``flush`` every queued item is dropped too (``interrupted``, reason
        "flushed"). Items submitted after this call are not affected.
        """
        with self._lock:
            self._stop_epoch += 1
            for item in self._queue.take_all() if flush else []:
                self._events.settle_later(item, Outcome.INTERRUPTED, "flushed by stop")
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
                self._events.settle_later(item, Outcome.INTERRUPTED, "player closed")
        self._wake.set()
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def stats(self) -> PlayerStats:
        """Counters and state for health reports (any thread)."""
        with self._lock:
            volume = self._volume
            alive = self._thread is not None and self._thread.is_alive()
        return self._book.snapshot(queue_depth=len(self._queue), volume=volume, alive=alive)

    # -- player thread: the idle loop ------------------------------------------------------

    def _run(self) -> None:
        log.info("audio_player_started", device=self._settings.device)
        self._device_volume.setup()
        self._book.set_volume_control(self._device_volume.control)
        try:
            self._output.probe()
        finally:
            self._probed.set()
        while True:
            try:
                if not self._step():
                    break
            except Exception as exc:  # a bug must not take the audio path down for good
                log.exception("audio_player_error")
                self._book.count_internal_error()
                self._abandon(f"internal error in the audio player: {exc}")
                self._wake.wait(min(1.0, self._settings.reopen_interval_s))
        self._shutdown()
        log.info("audio_player_stopped")

    def _step(self) -> bool:
        """One pass of the idle loop; False when the player must end."""
        self._wake.clear()
        self._events.emit_pending()
        if self._is_closing():
            return False
        self._apply_volume()
        self._expire_queued()
        held = self._release_held()
        try:
            if self._stop_epoch != self._seen_epoch:
                self._seen_epoch = self._stop_epoch
                self._output.cut("stopped")
            item = self._queue.pop()
            if item is not None:
                self._play(item)
                return True
            if self._output.has_marks:  # push the end of the last utterance out of the buffer
                self._output.write_silence(self._output.period())
                return True
            self._output.stop_stream()
        except DeviceError as exc:
            self._device_failed(str(exc))
            return True
        wait = self._output.housekeeping()
        self._wake.wait(held if wait is None else wait if held is None else min(wait, held))
        return True

    def _play(self, item: PlayItem) -> None:
        self._book.set_playing(item.request_id)
        self._current = item
        utterance = Utterance(item, self._seen_epoch)
        try:
            with bind_request(item.request_id):
                self._play_utterance(utterance)
        except DeviceError as exc:
            self._device_failed(str(exc))
        except Exception as exc:
            self._events.finish(item, Outcome.FAILED, f"internal error in the audio player: {exc}")
            raise
        finally:
            self._current = None
            self._book.set_playing(None)

    # -- player thread: one utterance ------------------------------------------------------

    def _play_utterance(self, u: Utterance) -> None:
        item = u.item
        if item._expired(time.monotonic()):
            self._events.finish(item, Outcome.EXPIRED, "deadline passed before playback")
            return
        if item.format is not None and not self._prepare(u, item.format):
            return
        log.debug("utterance_begin", priority=item.priority)
        while item.result is None:  # settled elsewhere: device failure
            self._wake.clear()
            self._events.emit_pending()
            self._apply_volume()
            self._expire_queued()
            self._release_held()
            ending = self._ending(u)
            if ending is not None:
                self._end(u, ending)
                return
            period = self._output.period()
            if u.pending_frames < period and not u.source_done and self._pull(u):
                continue
            if item.sync is not None and u.converter is not None and not self._placed(
                    u, item.sync):
                if item.result is not None:
                    return
                continue
            if u.converter is None and u.pending_frames == 0 and not u.source_done:
                pass  # no format yet: wait for the first chunk
            elif u.pending_frames >= period or (u.source_done and u.pending_frames):
                self._write_audio(u, u.take(period))
                continue
            elif u.source_done:
                self._utterance_written(u)
                return
            ending = starved(u, self._settings.producer_timeout_s, time.monotonic())
            if ending is not None:
                self._end(u, ending)
                return
            self._keep_fed(u)
            self._wake.wait(self._output.wait_step())

    def _placed(self, u: Utterance, sync: SyncStart) -> bool:
        """Whether a synchronized utterance may write its audio (one approach step if not:
        :mod:`agent.audio.placement`)."""
        step = self._placer.advance(u, sync)
        if step in (Step.MISSED, Step.PAST):
            why = "(audio.sync_late = skip)" if step is Step.MISSED else ": all of it was past"
            self._events.finish(u.item, Outcome.EXPIRED,
                                f"late by {u.late_ms:g} ms for its synchronized start {why}")
        elif step is Step.SKIPPING:
            self._keep_fed(u)
        if step in (Step.WAIT, Step.SKIPPING):
            self._wake.wait(self._output.wait_step() / 2)
        return step is Step.PLACED

    def _ending(self, u: Utterance) -> Ending | None:
        """Why the utterance must end now, if it must."""
        if self._is_closing():
            return CLOSED
        if self._stop_epoch != u.epoch:
            self._seen_epoch = self._stop_epoch
            return STOPPED
        return interruption(u.item, self._queue.head())

    def _pull(self, u: Utterance) -> bool:
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

    def _prepare(self, u: Utterance, fmt: AudioFormat) -> bool:
        """Open the device for ``fmt`` and write the lead-in; False when the item failed."""
        try:
            device = self._output.ensure(fmt)
        except DeviceError as exc:
            self._book.count_device_error()
            self._events.finish(u.item, Outcome.FAILED, str(exc))
            return False
        self._output.start_utterance(u, device.params)
        return True

    def _end(self, u: Utterance, ending: Ending) -> None:
        if ending.cut:
            self._events.finish(u.item, ending.kind, ending.reason, u.audio_seconds)
            self._output.cut(ending.reason)
            return
        if u.started and self._output.device is not None and u.converter is not None:
            self._fade_out(u)
        self._events.finish(u.item, ending.kind, ending.reason, u.audio_seconds)

    def _fade_out(self, u: Utterance) -> None:
        """Write the next ``fade_ms`` of the utterance fading to silence."""
        want = round(self._output.params.rate * self._settings.fade_ms / 1000)
        while u.pending_frames < want and u.converter is not None:
            chunk = u.item._take()
            if chunk is None:
                break
            u.add(u.converter.push(chunk))
        block = u.take(min(want, u.pending_frames))
        if len(block):
            self._write_audio(u, block, fade_out_curve(want)[: len(block)])

    def _utterance_written(self, u: Utterance) -> None:
        """All audio is written: finished once it has been pushed out of the buffer."""
        if not u.started:
            self._events.finish(u.item, Outcome.FINISHED, None, u.audio_seconds)
            return
        self._output.mark_end(u)

    def _write_audio(self, u: Utterance, block: np.ndarray,
                     shape: np.ndarray | None = None) -> None:
        sync = u.item.sync
        detail = self._placer.started(u, sync) if sync is not None and not u.started else None
        if self._output.write_audio(u, block, shape):
            self._events.deliver(PlaybackEvent(Progress.STARTED, u.item.request_id, None,
                                               u.audio_seconds, detail))

    def _keep_fed(self, u: Utterance) -> None:
        """While waiting for the producer, keep a running stream from underrunning.

        What the utterance already has goes out first, the resampler's tail
        included, so a gap falls between sentences, never inside one.
        """
        if not self._output.needs_feed():
            return
        if u.converter is not None:
            u.add(u.converter.flush())
        if u.pending_frames:
            self._write_audio(u, u.take(u.pending_frames))
        else:
            self._output.write_silence(self._output.period())

    # -- player thread: state, failures, shutdown ------------------------------------------

    def _apply_volume(self) -> None:
        with self._lock:
            volume = self._volume
        control = self._device_volume.control
        self._device_volume.apply(volume)
        if self._device_volume.control != control:
            self._book.set_volume_control(self._device_volume.control)

    def _release_held(self) -> float | None:
        """Let synchronized items in shortly before their time; seconds to the next one."""
        return self._queue.release_due(time.monotonic(), self._placer.prepare_s())

    def _expire_queued(self) -> None:
        for item in self._queue.take_expired(time.monotonic()):
            self._events.finish(item, Outcome.EXPIRED, "deadline passed before playback")

    def _is_closing(self) -> bool:
        with self._lock:
            return self._closing

    def _device_failed(self, reason: str) -> None:
        """The device failed: close it, fail what is in its buffer and playing, retry later."""
        self._output.fail(reason)
        if self._current is not None:
            self._events.finish(self._current, Outcome.FAILED, reason)

    def _abandon(self, reason: str) -> None:
        """After an unexpected error: fail what is in flight and start clean."""
        if self._current is not None:
            self._events.finish(self._current, Outcome.FAILED, reason)
        self._output.settle_marks(Outcome.FAILED, reason)
        self._output.reset()

    def _shutdown(self) -> None:
        self._output.settle_marks(Outcome.INTERRUPTED, "player closed")
        self._events.emit_pending()
        for item in self._queue.take_all():
            self._events.finish(item, Outcome.INTERRUPTED, "player closed")
        self._output.shutdown()
        self._device_volume.close()
