"""The dispatcher thread: executes validated commands taken from the intake queue.

``speak`` is checked against the installed voices, its expiry computed, ``accepted`` published
and the job queued for the synthesis worker. ``stop``, ``volume``, ``reload`` and ``ping`` act
at once and are answered with their final event (``done`` / ``pong`` / ``failed``). A ``ping``
also asks for a fresh health report (``on_ping``), so the retained snapshot on
``{prefix}/{device}/health`` is renewed right after the ``pong``. Nothing here synthesizes or
touches the network socket; control commands never wait behind synthesis. Between commands
(at least every :data:`_TURN_S`) it has the tracker publish ``progress`` for open speak requests
that have been quiet for ``progress_interval_s`` (:meth:`RequestTracker.heartbeat`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

from agent.logs import bind_request, get_logger
from agent.mqtt.intake import Inbox, Request
from agent.mqtt.protocol import (
    PingCommand,
    PingStatus,
    ReloadCommand,
    SpeakCommand,
    StopCommand,
    VolumeCommand,
)
from agent.mqtt.tracker import OpenRefused, RequestTracker
from agent.outcomes import Outcome
from agent.pipeline.admit import (
    Ask,
    Code,
    Context,
    Refusal,
    admit,
    deadline_of,
    document_of,
)
from agent.pipeline.jobs import JobQueue, SpeakJob, SpeakRequest
from agent.text.document import Document
from agent.text.limits import HARD_MAX_TEXT_CHARS
from agent.text.ssml_tree import SsmlError

__all__ = ["Controls", "Dispatcher", "ReloadError", "speak_ask", "speak_deadline",
           "speak_document", "speak_request"]

log = get_logger(__name__)

_TURN_S = 0.5
"""Longest wait for the next command before the dispatcher looks at the heartbeat again."""


class Controls(Protocol):
    """What the dispatcher needs from the player (:class:`agent.audio.player.AudioPlayer`)."""

    def stop(self, flush: bool = False) -> object: ...

    def set_volume(self, volume: float) -> None: ...


class ReloadError(Exception):
    """A reload could not be done; the message is the reason sent back."""


def speak_ask(command: SpeakCommand, request: Request | None = None) -> Ask:
    """The door-neutral :class:`~agent.pipeline.admit.Ask` of a ``speak`` (MQTT, Hermes and
    the Home Assistant notify topic all come as one); ``request`` brings the receipt time and
    the MQTT Message Expiry."""
    return Ask(text=command.text, ssml=command.ssml, voice=command.voice,
               priority=command.priority, volume=command.volume, speed=command.speed,
               chime=command.chime, expires_in_s=command.expires_in_s,
               expires_at=command.expires_at, at_ms=command.at,
               received=None if request is None else request.received,
               deadline=None if request is None else request.deadline)


def speak_deadline(command: SpeakCommand, request: Request) -> float | None:
    """The monotonic time by which the request must start playing, or None
    (:func:`agent.pipeline.admit.deadline_of`)."""
    return deadline_of(speak_ask(command, request))


def speak_document(command: SpeakCommand,
                   sounds: Collection[str] | None = None) -> Document | None:
    """The SSML document of a ``speak`` (``ssml`` true, or unset and the text starts with
    ``<speak``), or None for plain text. Raises :class:`~agent.text.ssml.SsmlError`."""
    document = document_of(command.text, command.ssml, len(command.text), sounds)
    if isinstance(document, Refusal):
        raise SsmlError(document.reason)
    return document


def speak_request(command: SpeakCommand, *,
                  sounds: Collection[str] | None = None) -> SpeakRequest:
    """The pipeline's view of a validated ``speak`` command (the pipeline knows no MQTT),
    admitted with no voice, chime or script check (a journalled request replayed).

    SSML is parsed here (the caller's thread): raises :class:`~agent.text.ssml.SsmlError`."""
    admitted = admit(speak_ask(command), Context(
        max_text_chars=len(command.text), sounds=None if sounds is None else lambda: sounds))
    if isinstance(admitted, Refusal):
        raise SsmlError(admitted.reason) if admitted.code is Code.BAD_SSML else ValueError(
            admitted.reason)
    return admitted.request


class Dispatcher:
    """Thread ``dispatch``: one request at a time from the intake queue (an :class:`Inbox`:
    control commands first)."""

    def __init__(
        self,
        requests: Inbox | queue.Queue[Request],
        jobs: JobQueue,
        tracker: RequestTracker,
        controls: Controls,
        *,
        voice_names: Callable[[], list[str]],
        default_voice: str,
        status: Callable[[], PingStatus],
        reload: Callable[[ReloadCommand], list[str]],
        on_volume: Callable[[float], None] | None = None,
        on_ping: Callable[[PingCommand, float], None] | None = None,
        progress_interval_s: float | None = None,
        chime_names: Callable[[], Collection[str]] | None = None,
        chime_default: Callable[[str], str | None] | None = None,
        speakable: Callable[[Document, str], str | None] | None = None,
    ) -> None:
        self.requests = requests
        self.jobs = jobs
        self.tracker = tracker
        self.controls = controls
        self.voice_names = voice_names
        self.default_voice = default_voice
        self.status = status
        self.reload = reload
        self.on_volume = on_volume
        self.on_ping = on_ping
        """Called (dispatch thread) for every ``ping`` with the command and its arrival
        (Unix time); must not block (it notes the clock and wakes the health reporter)."""
        self.progress_interval_s = progress_interval_s
        """Quiet time after which an open speak request gets ``progress``; None: never."""
        self.chime_names = chime_names
        """The chimes a request may name (``chime``, SSML ``<audio src>``); None: unchecked."""
        self.chime_default = chime_default
        """The chime of a priority level (``chimes.by_priority``), or None."""
        self.speakable = speakable
        """Why a document cannot be said by its voices (``(document, voice) -> reason``: a
        script they cannot speak, nothing to speak), or None; None: unchecked."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.steps = 0
        """Requests handled (progress counter for the health watchdog)."""
        self._answered: str | None = None
        """The id of the request being handled once its handler has answered it."""

    @property
    def admission(self) -> Context:
        """What :func:`~agent.pipeline.admit.admit` checks a ``speak`` against here (the
        text was bounded by the intake already, with ``synthesis.max_text_chars``)."""
        return Context(max_text_chars=HARD_MAX_TEXT_CHARS, default_voice=self.default_voice,
                       voices=self.voice_names, sounds=self.chime_names,
                       chime_problem=None if self.chime_names is None else self._chime_problem,
                       chime_default=self.chime_default, speakable=self.speakable)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dispatch", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def drain(self) -> list[Request]:
        """Remove the requests still waiting in the intake queue (shutdown). Any thread."""
        drained = []
        while True:
            try:
                drained.append(self.requests.get_nowait())
            except queue.Empty:
                return drained

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                request = self.requests.get(timeout=_TURN_S)
            except queue.Empty:
                request = None
            if self.progress_interval_s is not None:
                self.tracker.heartbeat(self.progress_interval_s)
            if request is None:
                continue
            with bind_request(request.id, command=request.name):
                self._answered = None
                try:
                    self.handle(request)
                except Exception as exc:  # answer even when a handler has a bug
                    log.exception("dispatch_error")
                    self._answer_failure(request, exc)
            self.steps += 1

    def _answer_failure(self, request: Request, exc: Exception) -> None:
        """The one final answer of a request whose handler raised: none if the handler had
        answered it already, the open request's ``failed`` if it was opened (a speak), else
        ``failed`` at once."""
        reason = f"internal error: {type(exc).__name__}"
        if self._answered == request.id or self.tracker.finish(request.id, Outcome.FAILED,
                                                               reason=reason):
            return
        self.tracker.answer(request.id, request.name, Outcome.FAILED, reason=reason,
                            reply=request.reply, hermes=request.hermes)

    def handle(self, request: Request) -> None:
        """Execute one request (dispatch thread)."""
        command = request.command
        if isinstance(command, SpeakCommand):
            self._speak(request, command)
        elif isinstance(command, StopCommand):
            cleared = 0
            if command.clear_queue:
                for job in self.jobs.take_all():
                    cleared += self.tracker.finish(job.request_id, Outcome.INTERRUPTED,
                                                   reason="cleared by stop")
            self.controls.stop(flush=command.clear_queue)
            self._done(request, Outcome.DONE, pending=cleared)
        elif isinstance(command, VolumeCommand):
            self.controls.set_volume(command.volume)
            if self.on_volume is not None:
                self.on_volume(command.volume)
            self._done(request, Outcome.DONE, volume=command.volume)
        elif isinstance(command, ReloadCommand):
            try:
                voices = self.reload(command)
            except ReloadError as exc:
                self._done(request, Outcome.FAILED, reason=str(exc))
            else:
                self._done(request, Outcome.DONE, voices=voices)
        elif isinstance(command, PingCommand):
            self._done(request, Outcome.PONG, status=self.status())
            if self.on_ping is not None:
                self.on_ping(command, time.time() - (time.monotonic() - request.received))

    def _done(self, request: Request, event: Outcome, **fields: Any) -> None:
        self._answered = request.id
        self.tracker.answer(request.id, request.name, event,
                            reply=request.reply, hermes=request.hermes, **fields)

    def _speak(self, request: Request, command: SpeakCommand) -> None:
        admitted = admit(speak_ask(command, request), self.admission)
        if isinstance(admitted, Refusal):  # the one admission every door uses
            event = Outcome.EXPIRED if admitted.code is Code.EXPIRED else Outcome.REJECTED
            self._done(request, event, reason=admitted.reason)
            return
        if len(self.jobs) >= self.jobs.maxsize:  # only this thread adds jobs: no race
            self._done(request, Outcome.REJECTED,
                       reason=f"busy: {self.jobs.maxsize} speak requests already queued")
            return
        job = SpeakJob(request.id, admitted.request, admitted.deadline)
        pending = self.tracker.pending()
        try:  # the request journal may refuse it (full, or it cannot be written)
            opened = self.tracker.open(request.id, request.name, reply=request.reply,
                                       hermes=request.hermes, subject=job,
                                       voice=admitted.voice, priority=command.priority,
                                       pending=pending,
                                       progress_interval_s=self.progress_interval_s)
        except OpenRefused as exc:
            self._done(request, Outcome.REJECTED, reason=str(exc))
            return
        if not opened:
            self._done(request, Outcome.REJECTED,
                       reason=f"id {request.id!r} is already in progress")
            return
        self.jobs.put(job)

    def _chime_problem(self, name: str) -> str | None:
        """Why the chime ``name`` cannot be played (not among :attr:`chime_names`), or None."""
        available = None if self.chime_names is None else self.chime_names()
        if available is None or name in available:
            return None
        have = ", ".join(sorted(available)) or "none"
        return f"unknown chime {name!r} (available: {have})"
