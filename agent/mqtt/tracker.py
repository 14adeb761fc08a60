"""The one place that decides a command's events: every command gets exactly one final event.

Speak requests are *open* from ``accepted`` until their final event; whichever thread reports
the end first (the player, the synthesis worker, a ``stop``, shutdown) wins and later reports
for the same id are ignored. Other commands and rejections are answered at once with
:meth:`RequestTracker.answer`.

A final event also goes to the command's MQTT 5 Response Topic (with its Correlation Data),
and for a Hermes ``say`` to ``hermes/tts/sayFinished`` (after ``hermes/error/tts`` when it did
not finish normally).

Thread-safe; called from the MQTT network thread, the dispatcher, the synthesis worker and the
player thread. Events are published under the lock so they leave in the order decided here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from agent.logs import get_logger
from agent.mqtt.hermes import HermesOrigin
from agent.mqtt.protocol import FINAL_EVENTS, CommandEvent, EventName
from agent.mqtt.publisher import EventPublisher, ReplyRoute

__all__ = ["RequestTracker"]

log = get_logger(__name__)

_STICKY_FIELDS = ("voice", "version", "priority", "synthesis_ms")
"""Fields remembered from earlier events of a request and repeated in its final event."""


@dataclass
class _Open:
    command: str
    reply: ReplyRoute | None
    hermes: HermesOrigin | None
    fields: dict[str, Any] = field(default_factory=dict)


class RequestTracker:
    """Open speak requests and the events that move them along. See the module docstring."""

    def __init__(self, publisher: EventPublisher) -> None:
        self.publisher = publisher
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open: dict[str, _Open] = {}
        self.served = 0
        self.failed = 0

    def open(self, request_id: str, command: str, *, reply: ReplyRoute | None = None,
             hermes: HermesOrigin | None = None, **fields: Any) -> bool:
        """Start tracking a request and publish ``accepted``; False if the id is already open."""
        with self._lock:
            if request_id in self._open:
                return False
            entry = _Open(command, reply, hermes,
                          {k: v for k, v in fields.items() if k in _STICKY_FIELDS})
            self._open[request_id] = entry
            self._publish(request_id, entry, "accepted", fields)
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

    def progress(self, request_id: str, event: EventName, **fields: Any) -> bool:
        """Publish a non-final event for an open request; False if it is no longer open."""
        if event in FINAL_EVENTS:
            raise ValueError(f"{event} is a final event; use finish()")
        with self._lock:
            entry = self._open.get(request_id)
            if entry is None:
                return False
            self._publish(request_id, entry, event, fields)
            return True

    def finish(self, request_id: str, event: EventName, **fields: Any) -> bool:
        """Publish the final event of an open request; False (and nothing sent) if already final."""
        if event not in FINAL_EVENTS:
            raise ValueError(f"{event} is not a final event")
        with self._lock:
            entry = self._open.pop(request_id, None)
            if entry is None:
                log.debug("late_final_ignored", id=request_id, event_name=event)
                return False
            if event == "finished":
                self.served += 1
            else:
                self.failed += 1
            self._publish(request_id, entry, event, fields)
            if not self._open:
                self._idle.notify_all()
            return True

    def answer(self, request_id: str, command: str | None, event: EventName, *,
               reply: ReplyRoute | None = None, hermes: HermesOrigin | None = None,
               **fields: Any) -> None:
        """Answer a command that is not tracked (control commands, rejections) at once."""
        if event not in FINAL_EVENTS:
            raise ValueError(f"{event} is not a final event")
        with self._lock:
            self._publish(request_id, _Open(command or "", reply, hermes), event, fields)

    def _publish(self, request_id: str, entry: _Open, event: EventName,
                 fields: dict[str, Any]) -> None:
        merged = {**entry.fields, **fields}
        message = CommandEvent(id=request_id, event=event, device=self.publisher.device_id,
                               command=entry.command or None, **merged)
        self.publisher.event(message, entry.reply)
        if entry.hermes is not None and message.final:
            if event not in {"finished", "interrupted"}:
                self.publisher.raw(entry.hermes.error(message.reason or event))
            self.publisher.raw(entry.hermes.finished())
        level = "info" if message.final or event == "accepted" else "debug"
        getattr(log, level)("request_event", id=request_id, event_name=event,
                            command=entry.command, reason=message.reason)
