"""The one place that decides a command's events: every command gets exactly one final event.

Speak requests are *open* from ``accepted`` until their final event (the first report of an end
wins); repeated ids are answered ``in_progress`` or ``duplicate`` (:mod:`agent.mqtt.repeats`);
final events also go to the Response Topic and Hermes; ended requests are counted by the
``recorder`` and told to the ``observer`` (the request journal). Thread-safe: events are
published under the lock, in the order decided here. Design:
docs/internals.md#the-request-tracker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.logs import get_logger
from agent.mqtt.client import OutboundMessage
from agent.mqtt.hermes import HermesOrigin
from agent.mqtt.protocol import CommandEvent, to_payload
from agent.mqtt.publisher import EventPublisher, ReplyRoute
from agent.mqtt.repeats import IN_PROGRESS_REASON, MAX_REPEAT_ROUTES, EndedWith, Key, RecentIds
from agent.outcomes import FREE_ID, HERMES_NORMAL, SPEAK_OUTCOMES, EventName, Outcome, Progress

__all__ = ["OpenRefused", "RequestObserver", "RequestRecorder", "RequestTracker"]

log = get_logger(__name__)

_STICKY_FIELDS = ("voice", "version", "priority", "synthesis_ms", "replayed")
"""Fields remembered from earlier events of a request and repeated in its final event."""
_SYNC_FIELDS = ("start_at_ms", "late_by_ms", "skipped_ms")
"""A synchronized start's facts (from ``started``), repeated in the events after it."""
_SPEAK = "speak"


class RequestRecorder(Protocol):
    """What the tracker reports ended speak requests to (:class:`agent.health.snapshot.Health`)."""

    def record_request(self, outcome: Any, *, synthesis_s: float | None = None,
                       audio_s: float | None = None,
                       first_audio_s: float | None = None) -> None: ...


class OpenRefused(Exception):
    """Raised by an observer's ``opened``: the request must not be accepted; the message is
    the reason to reject it with."""


class RequestObserver(Protocol):
    """Told about tracked requests under the tracker's lock, before the event that follows
    leaves. See the module docstring."""

    def opened(self, request_id: str, command: str, *, reply: ReplyRoute | None,
               hermes: HermesOrigin | None, subject: object) -> bool:
        """Before ``accepted``; raise :class:`OpenRefused` to refuse the request; False: it
        could not be kept (``accepted`` says ``journaled: false``). ``subject`` is what
        :meth:`RequestTracker.open` was given (the dispatcher's speak job)."""
        ...

    def noted(self, request_id: str) -> None:
        """The pipeline noted facts of an open request (the synthesis worker does when it
        takes the request up, before the player has it)."""
        ...

    def closed(self, request_id: str, event: Outcome, reason: str | None = None) -> None:
        """Before the request's final event (``event``, with ``reason``)."""
        ...


@dataclass
class _Open:
    command: str
    reply: ReplyRoute | None
    hermes: HermesOrigin | None
    fields: dict[str, Any] = field(default_factory=dict)
    opened_at: float = 0.0
    """Clock time of ``accepted``."""
    first_audio_at: float | None = None
    """Clock time of ``started`` (first frame written to the device)."""
    last_event_at: float = 0.0
    """Clock time of its latest event (for :meth:`RequestTracker.heartbeat`)."""
    repeats: list[ReplyRoute] = field(default_factory=list)
    """Response Topics of repeats that came before the end; the final event goes there too."""


class RequestTracker:
    """Open speak requests and the events that move them along. See the module docstring.

    ``recorder`` counts ended speak requests (see the module docstring); ``clock`` is the
    monotonic clock their timings are taken with. It is the :class:`agent.outcomes.Reporter`
    of both the synthesis worker and the player (structurally: ``is_open``, ``note``,
    ``progress``, ``finish``).
    """

    def __init__(self, publisher: EventPublisher, *, recorder: RequestRecorder | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 observer: RequestObserver | None = None) -> None:
        self.publisher = publisher
        self.recorder = recorder
        self.observer = observer
        self._clock = clock
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open: dict[str, _Open] = {}
        self._waiting: dict[Key, list[ReplyRoute]] = {}
        """Admitted, not yet opened or answered (in the intake queue), with repeats' routes."""
        self._ended = RecentIds()
        """Outcomes of recent requests that used up their id."""
        self.served = 0
        self.failed = 0

    def open(self, request_id: str, command: str, *, reply: ReplyRoute | None = None,
             hermes: HermesOrigin | None = None, subject: object = None, **fields: Any) -> bool:
        """Start tracking a request and publish ``accepted``; False if the id is already open.
        Raises :class:`OpenRefused` (nothing published) when the observer refuses it."""
        with self._lock:
            if request_id in self._open:
                return False
            if self.observer is not None and not self.observer.opened(
                    request_id, command, reply=reply, hermes=hermes, subject=subject):
                fields = {**fields, "journaled": False}  # the loss stated
            entry = _Open(command, reply, hermes,
                          {k: v for k, v in fields.items() if k in _STICKY_FIELDS},
                          opened_at=self._clock(),
                          repeats=self._waiting.pop((command, request_id), []))
            entry.last_event_at = entry.opened_at
            self._open[request_id] = entry
            self._publish(request_id, entry, Progress.ACCEPTED, fields)
            return True

    def is_open(self, request_id: str) -> bool:
        with self._lock:
            return request_id in self._open

    def pending(self) -> int:
        """Requests accepted and not yet final."""
        with self._lock:
            return len(self._open)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is open; False if ``timeout`` passed first. Any thread."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._open, timeout)

    def open_ids(self) -> list[str]:
        with self._lock:
            return list(self._open)

    def note(self, request_id: str, **fields: Any) -> None:
        """Remember fields (voice, synthesis_ms...) for the request's later events."""
        with self._lock:
            entry = self._open.get(request_id)
            if entry is not None:
                entry.fields.update(fields)
                if self.observer is not None:
                    self.observer.noted(request_id)

    def progress(self, request_id: str, event: Progress, **fields: Any) -> bool:
        """Publish a non-final event for an open request; False if it is no longer open.
        Raises ValueError for a word that is not a :class:`~agent.outcomes.Progress`."""
        event = _progress(event)
        with self._lock:
            entry = self._open.get(request_id)
            if entry is None:
                return False
            entry.last_event_at = self._clock()
            if event is Progress.STARTED and entry.first_audio_at is None:
                entry.first_audio_at = entry.last_event_at
            if "start_at_ms" in fields:  # a synchronized start: told on every later event too
                entry.fields.update((k, fields[k]) for k in _SYNC_FIELDS if k in fields)
            self._publish(request_id, entry, event, fields)
            return True

    def heartbeat(self, interval_s: float) -> int:
        """Publish ``progress`` for every open request that has had no event for
        ``interval_s`` (state ``waiting`` before its first audio, ``playing`` after), so a
        controller waiting for the final event can tell a long announcement from silence.
        At most one per request per interval; returns how many were published. Any thread
        (the dispatcher calls it between commands)."""
        with self._lock:
            now = self._clock()
            due = [(request_id, entry) for request_id, entry in self._open.items()
                   if now - entry.last_event_at >= interval_s]
            for request_id, entry in due:
                entry.last_event_at = now
                state = "waiting" if entry.first_audio_at is None else "playing"
                self._publish(request_id, entry, Progress.PROGRESS, {"state": state})
            return len(due)

    def finish(self, request_id: str, event: Outcome, **fields: Any) -> bool:
        """Publish the final event of an open request; False (and nothing sent) if already
        final. Raises ValueError for a word that is not an :class:`~agent.outcomes.Outcome`."""
        event = _final(event)
        with self._lock:
            entry = self._open.pop(request_id, None)
            if entry is None:
                log.debug("late_final_ignored", id=request_id, event_name=event)
                return False
            if event is Outcome.FINISHED:
                self.served += 1
            else:
                self.failed += 1
            if self.observer is not None:
                self.observer.closed(request_id, event, fields.get("reason"))
            self._ended.remember((entry.command, request_id),
                                 EndedWith(event, fields.get("reason")))
            self._record(entry, event, fields)
            self._publish(request_id, entry, event, fields)
            if not self._open:
                self._idle.notify_all()
            return True

    def answer(self, request_id: str, command: str | None, event: Outcome, *,
               reply: ReplyRoute | None = None, hermes: HermesOrigin | None = None,
               admitted: bool = True, **fields: Any) -> None:
        """Answer a command that is not tracked (control commands, rejections) at once.

        ``admitted``: the command went through :meth:`admit` (it ends waiting here, and uses up
        its id unless ``event`` is ``rejected`` or ``expired``). False for a message refused
        before it was admitted (unreadable, invalid): it changes nothing that is remembered.
        """
        event = _final(event)
        entry = _Open(command or "", reply, hermes)
        with self._lock:
            if admitted:
                key = (entry.command, request_id)
                entry.repeats = self._waiting.pop(key, [])
                if event not in FREE_ID:
                    self._ended.remember(key, EndedWith(event, fields.get("reason")))
            self._record(entry, event, {}, timed=False)
            self._publish(request_id, entry, event, fields)

    def remember_ended(self, request_id: str, command: str, outcome: EndedWith,
                       age_s: float) -> None:
        """Remember a request that ended ``age_s`` seconds ago (before a restart, from the
        journal) as used up, so a repeat is answered ``duplicate`` with ``outcome``. Called
        oldest first, before any command is admitted."""
        with self._lock:
            self._ended.remember((command, request_id), outcome,
                                 time.monotonic() - max(0.0, age_s))

    def admit(self, request_id: str, command: str, *, reply: ReplyRoute | None = None,
              hermes: HermesOrigin | None = None) -> bool:
        """Before a command is queued (network thread): True if ``(command, id)`` is new (it is
        waiting from now on); False if it repeats one, and the repeat has been answered."""
        key = (command, request_id)
        with self._lock:
            entry = self._open.get(request_id)
            routes = (entry.repeats if entry is not None and entry.command == command
                      else self._waiting.get(key))
            if routes is not None:
                if reply is not None and len(routes) < MAX_REPEAT_ROUTES:
                    routes.append(reply)
                self._publish(request_id, _Open(command, None, None), Progress.IN_PROGRESS,
                              {"reason": IN_PROGRESS_REASON})
                return False
            known, outcome = self._ended.recall(key)
            if known and outcome is not None:
                self._publish(request_id, _Open(command, reply, hermes), Outcome.DUPLICATE,
                              {"outcome": outcome.event, "reason": outcome.reason})
                return False
            self._waiting[key] = []
            return True

    def _record(self, entry: _Open, event: Outcome, fields: dict[str, Any], *,
                timed: bool = True) -> None:
        """Count an ended speak request with the recorder, before its final event leaves
        (so whoever sees the event finds it counted). Caller holds the lock; the recorder
        only takes a lock of its own."""
        if self.recorder is None or entry.command != _SPEAK or event not in SPEAK_OUTCOMES:
            return
        synthesis_s = audio_s = first_audio_s = None
        if timed:
            merged = {**entry.fields, **fields}
            synthesis_ms = merged.get("synthesis_ms")
            synthesis_s = synthesis_ms / 1000 if synthesis_ms is not None else None
            audio_s = merged.get("audio_s")
            if entry.first_audio_at is not None and "start_at_ms" not in entry.fields:
                first_audio_s = max(0.0, entry.first_audio_at - entry.opened_at)  # not a wait
        try:
            self.recorder.record_request(event, synthesis_s=synthesis_s, audio_s=audio_s,
                                         first_audio_s=first_audio_s)
        except Exception:  # counting must never cost a request its answer
            log.exception("request_record_failed", event_name=event)

    def _publish(self, request_id: str, entry: _Open, event: EventName,
                 fields: dict[str, Any]) -> None:
        merged = {**entry.fields, **fields}
        message = CommandEvent(id=request_id, event=event, device=self.publisher.device_id,
                               command=entry.command or None, **merged)
        self.publisher.event(message, entry.reply)
        if message.final:
            for route in entry.repeats:  # repeats that came while the request was open
                self.publisher.raw(OutboundMessage(route.topic, to_payload(message),
                                                   correlation_data=route.correlation_data))
        if entry.hermes is not None and message.final:
            if (message.outcome or event) not in HERMES_NORMAL:
                self.publisher.raw(entry.hermes.error(message.reason or event))
            self.publisher.raw(entry.hermes.finished())
        level = ("info" if message.final or event in (Progress.ACCEPTED, Progress.IN_PROGRESS)
                 else "debug")
        getattr(log, level)("request_event", id=request_id, event_name=event,
                            command=entry.command, reason=message.reason)


def _final(event: str) -> Outcome:
    """``event`` as a final event; ValueError when it is none (only the enum's words leave)."""
    try:
        return Outcome(event)
    except ValueError:
        raise ValueError(f"{event} is not a final event") from None


def _progress(event: str) -> Progress:
    """``event`` as a progress event; ValueError for a final event or an unknown word."""
    if event in frozenset(Outcome):
        raise ValueError(f"{event} is a final event; use finish()")
    return Progress(event)
