"""The synthesis worker: the thread (``synthesis``) that turns queued speak jobs into play items.

It takes the most urgent job the player has room for, submits its play item and fills it
sentence by sentence; a strictly more urgent job preempts between sentences. The job's final
outcome comes from the player, or from the worker when the job never reached it; both report
through the one :class:`agent.outcomes.Reporter`. Priorities, backpressure and buffering:
docs/internals.md#the-synthesis-worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from agent.audio.format import AudioChunk
from agent.audio.item import PlayItem
from agent.audio.sync_start import LatePolicy, SyncStart
from agent.logs import bind_request, get_logger
from agent.outcomes import Outcome, Reporter, WorkerOutcome
from agent.pipeline.buffering import Buffering, BufferingSetting, SentenceGather, choose_buffering
from agent.pipeline.jobs import JobQueue, SpeakJob
from agent.pipeline.phrase_cache import PhraseCache
from agent.pipeline.render import ChimeSource, VoiceSource, render, request_document
from agent.voice.voice import Voice

__all__ = ["Player", "Reporter", "SynthesisWorker", "VoiceSource", "WorkerOutcome"]

log = get_logger(__name__)

_PUT_SLICE_S = 0.2
"""How long the worker waits on a full audio buffer before looking at the queue again."""
_ROOM_SLICE_S = 0.2
"""How long an idle worker waits for room in the play queue before looking at the queue
again (a more urgent job may have come, or a waiting one expired)."""
_IDLE_WAIT_S = 0.5
"""How long an idle worker with nothing queued waits for a job before checking for stop."""

class Player(Protocol):
    """What the worker needs from :class:`agent.audio.player.AudioPlayer`."""

    def submit(self, item: PlayItem) -> None: ...

    def has_room(self, priority: int, timeout: float = 0.0) -> bool:
        """Whether ``submit`` would take an item of ``priority``, waiting up to ``timeout``."""
        ...


SYNC_BUFFER_S = 600.0
"""Audio a synchronized request may hold ahead of its start (s): all of it is synthesized
before its time, so the worker is free for other requests while it waits."""

@dataclass(slots=True)
class _Active:
    """A job being synthesized: its play item, its sentence iterator, and a chunk in hand."""

    job: SpeakJob
    item: PlayItem
    chunks: Iterator[AudioChunk]
    carried: AudioChunk | None = None
    gather: SentenceGather | None = None
    """Set when sentences go to the player whole: holds a sentence's windows until it ends."""
    synthesis_s: float = 0.0


class SynthesisWorker:
    """The ``synthesis`` thread. See the module docstring."""

    def __init__(self, jobs: JobQueue, voices: VoiceSource, player: Player,
                 reporter: Reporter, *, item_buffer_s: float = 30.0,
                 phrase_cache: PhraseCache | None = None,
                 on_thread_start: Callable[[], None] | None = None,
                 buffering: BufferingSetting = "auto",
                 chimes: ChimeSource | None = None, sync_late: LatePolicy = "join") -> None:
        self.jobs = jobs
        self.chimes = chimes
        self.buffering_setting: BufferingSetting = buffering
        self.buffering = Buffering("sentence" if buffering == "sentence" else "stream")
        """How the last voice used (or :meth:`note_voice`'s) hands its audio to the player."""
        self.phrase_cache = phrase_cache
        self.on_thread_start = on_thread_start
        self.voices = voices
        self.player = player
        self.reporter = reporter
        self.item_buffer_s = item_buffer_s
        self.sync_late: LatePolicy = sync_late
        self._stack: list[_Active] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.busy_since: float | None = None
        """``time.monotonic()`` when the current step began, None when idle (for health)."""
        self.steps = 0
        """Completed work steps (progress counter for the health watchdog)."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="synthesis", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop after the current sentence; queued jobs stay in the queue. Any thread."""
        self._stop.set()
        self.jobs.close()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def note_voice(self, voice: Voice) -> Buffering:
        """Choose (and log, when it changes) how ``voice``'s audio reaches the player; the
        answer is :attr:`buffering` until another voice is used. Any thread."""
        chosen = choose_buffering(voice, self.buffering_setting)
        if chosen != self.buffering:
            log.info("playback_buffering", voice=voice.name, mode=chosen.mode,
                     realtime_factor=chosen.realtime_factor, reason=chosen.reason)
        self.buffering = chosen
        return chosen

    # -- synthesis thread -----------------------------------------------------------------

    def _run(self) -> None:
        if self.on_thread_start is not None:
            try:
                self.on_thread_start()
            except Exception:  # pinning is an optimisation; never fatal
                log.exception("synthesis_thread_setup_failed")
        while not self._stop.is_set():
            top = self._stack[-1] if self._stack else None
            try:
                job = self._next_job(top)
            except Exception:  # a bug must not kill the worker; look again a little later
                log.exception("synthesis_worker_error")
                self._stop.wait(_ROOM_SLICE_S)
                continue
            self.busy_since = time.monotonic()
            try:
                if job is not None:
                    self._begin(job)
                elif top is not None:
                    self._step(top)
            except Exception:  # a bug must not kill the worker; the request still gets an answer
                log.exception("synthesis_worker_error")
                if job is not None:
                    self.reporter.finish(job.request_id, Outcome.FAILED, reason="internal error")
                elif top is not None:
                    self._drop(top, "internal error")
            finally:
                self.busy_since = None
                self.steps += 1
        for active in reversed(self._stack):
            active.item.fail("agent stopping")
        self._stack.clear()

    def _next_job(self, top: _Active | None) -> SpeakJob | None:
        """The job to begin now: the most urgent queued one, if it is more urgent than the job
        being synthesized (``top``) and the player has room for it. Jobs whose deadline passed
        while they waited are answered ``expired`` first. Waits a little when idle."""
        for stale in self.jobs.take_expired(time.monotonic()):
            with bind_request(stale.request_id):
                self.reporter.finish(stale.request_id, Outcome.EXPIRED,
                                     reason="expired before synthesis started")
        floor = None if top is None else top.job.priority
        head = self.jobs.head()
        if top is None and head is not None:
            self.player.has_room(head.priority, _ROOM_SLICE_S)  # backpressure: wait for room
            return self.jobs.pop_above(floor, 0.0, admit=self.player.has_room)
        return self.jobs.pop_above(floor, 0.0 if top is not None else _IDLE_WAIT_S,
                                   admit=self.player.has_room)

    def _begin(self, job: SpeakJob) -> None:
        """Start a job: voice, play item, sentence iterator. Nothing heavy but the voice load."""
        request = job.request
        with bind_request(job.request_id):
            if not self.reporter.is_open(job.request_id):
                return  # cleared by a stop while queued
            if job.expired(time.monotonic()):
                self.reporter.finish(job.request_id, Outcome.EXPIRED,
                                    reason="expired before synthesis started")
                return
            try:
                rendered = render(request_document(request), self.voices, request,
                                  cache=self.phrase_cache, chimes=self.chimes)
            except Exception as exc:  # VoiceNotFound, VoiceLoadError, TextError, ChimeError
                self.reporter.finish(job.request_id, Outcome.FAILED, reason=str(exc))
                return
            voice, chunks = rendered.voice, rendered.chunks
            warnings = () if request.document is None else request.document.warnings
            if warnings:  # SSML for other engines: what is not done, named (docs/text.md)
                log.warning("ssml_ignored", ignored=list(warnings))
            self.reporter.note(job.request_id, voice=voice.name, version=voice.version,
                               **({"warnings": list(warnings)} if warnings else {}))
            item = PlayItem(
                job.request_id, priority=job.priority,
                volume=1.0 if request.volume is None else request.volume,
                expires_at=job.deadline, format=rendered.format,
                max_buffered_s=self.item_buffer_s if request.start_at is None
                else max(self.item_buffer_s, SYNC_BUFFER_S),
                sync=None if request.start_at is None
                else SyncStart.from_unix(request.start_at, self.sync_late),
            )
            try:
                self.player.submit(item)
            except Exception as exc:  # the player is closing (it had room: see _next_job)
                self.reporter.finish(job.request_id, Outcome.FAILED, reason=str(exc))
                return
            whole = self.note_voice(voice).mode == "sentence"
            self._stack.append(_Active(job, item, iter(chunks),
                                       gather=SentenceGather() if whole else None))

    def _step(self, active: _Active) -> None:
        """Synthesize the next chunk of the job on top (a sentence or a decoder window), or
        retry handing over a held chunk."""
        with bind_request(active.job.request_id):
            if not active.item.wanted:
                self._stack.pop()
                return
            if active.carried is None and not self._synthesize(active):
                return
            if active.carried is None:
                return  # a window held until its sentence is whole
            try:
                accepted = active.item.put(active.carried, timeout=_PUT_SLICE_S)
            except TimeoutError:
                return  # buffer full: look at the queue, then try again
            active.carried = None
            if not accepted:
                self._stack.pop()  # interrupted / expired / failed: the player has reported it

    def _synthesize(self, active: _Active) -> bool:
        """The job's next chunk into ``active.carried``, which stays None while a sentence's
        windows are gathered (whole sentences); False when the job is over (all of it handed
        over and the item closed, or synthesis failed)."""
        started = time.monotonic()
        try:
            chunk = next(active.chunks)
        except StopIteration:
            rest = active.gather.flush() if active.gather is not None else None
            if rest is not None:  # the producer ended inside a sentence: play what it made
                active.carried = rest
                return True
            self._stack.pop()
            self.reporter.note(active.job.request_id,
                               synthesis_ms=round(active.synthesis_s * 1000, 1))
            active.item.close()
            return False
        except Exception as exc:
            self._drop(active, f"synthesis failed: {exc}")
            return False
        finally:
            active.synthesis_s += time.monotonic() - started
        active.carried = chunk if active.gather is None else active.gather.add(chunk)
        return True

    def _drop(self, active: _Active, reason: str) -> None:
        if active in self._stack:
            self._stack.remove(active)
        active.item.fail(reason)
        log.warning("synthesis_failed", id=active.job.request_id, reason=reason)
