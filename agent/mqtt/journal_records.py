"""The request journal's records: one JSON object per line (:mod:`agent.mqtt.journal`).

``open`` (what is needed to answer the request, and with replay on what to say), ``begun`` (the
worker took it up) and ``close`` (its final event; kept as an outcome within the repeat window,
:class:`Ended`). Reading checks every record as strictly as a command; a line that fails is
counted, never trusted. The fields: docs/internals.md#the-journals-records.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent.logs import get_logger
from agent.mqtt.hermes import HermesOrigin
from agent.mqtt.protocol import FINAL_EVENTS, EventName
from agent.mqtt.publisher import ReplyRoute
from agent.mqtt.topics import Topic, TopicError

__all__ = ["Ended", "JournalEntry", "Journalled", "Outcomes", "mark", "parse", "read_records"]

log = get_logger(__name__)

_MAX_FIELD = 256
_Text = Annotated[str, Field(max_length=_MAX_FIELD)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _ReplyRecord(_Model):
    topic: str = Field(min_length=1, max_length=65535)
    correlation: str | None = Field(default=None, max_length=90_000)
    """Base64 of the Correlation Data."""


class _HermesRecord(_Model):
    id: _Text | None = None
    site: _Text
    session: _Text | None = None


class _OpenRecord(_Model):
    op: Literal["open"]
    v: Literal[1]
    id: str = Field(min_length=1, max_length=_MAX_FIELD)
    command: Literal["speak"]
    accepted_at: float
    deadline: float | None = None
    reply: _ReplyRecord | None = None
    hermes: _HermesRecord | None = None
    speak: dict[str, str | bool | float | None] | None = Field(default=None, max_length=16)
    replays: int = Field(default=0, ge=0, le=1000)


class _MarkRecord(_Model):
    op: Literal["begun", "close"]
    id: str = Field(min_length=1, max_length=_MAX_FIELD)
    event: EventName | None = None
    reason: _Text | None = None
    at: float | None = None


_RECORD: TypeAdapter[_OpenRecord | _MarkRecord] = TypeAdapter(
    Annotated[_OpenRecord | _MarkRecord, Field(discriminator="op")])


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One accepted, unfinished request as journalled."""

    request_id: str
    command: str
    accepted_at: float
    """Unix time of ``accepted`` (s)."""
    deadline: float | None
    """Unix time by which it had to start playing (s), or None."""
    reply: ReplyRoute | None
    hermes: HermesOrigin | None
    speak: dict[str, Any] | None
    """``text``, ``voice``, ``priority``, ``volume``, ``speed``, and ``ssml`` where the text
    alone does not tell (plain text that starts with ``<speak``) (replay on only)."""
    replays: int = 0
    """How often it was queued again after a restart."""
    begun: bool = False

    def record(self) -> bytes:
        reply = None if self.reply is None else {
            "topic": self.reply.topic.value,
            "correlation": (None if self.reply.correlation_data is None else
                            base64.b64encode(self.reply.correlation_data).decode("ascii"))}
        hermes = None if self.hermes is None else {
            "id": self.hermes.say_id, "site": self.hermes.site_id,
            "session": self.hermes.session_id}
        line = {"op": "open", "v": 1, "id": self.request_id, "command": self.command,
                "accepted_at": self.accepted_at, "deadline": self.deadline, "reply": reply,
                "hermes": hermes, "speak": self.speak, "replays": self.replays}
        text = json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n"
        if self.begun:
            text += mark("begun", self.request_id).decode("utf-8")
        return text.encode("utf-8")


@dataclass(frozen=True, slots=True)
class Ended:
    """The outcome of a speak request that ended: its final event, reason and Unix end time."""

    request_id: str
    event: EventName
    reason: str | None
    ended_at: float

    def record(self) -> bytes:
        """Its ``close`` record (the reason cut to the field bound)."""
        line: dict[str, Any] = {"op": "close", "id": self.request_id, "event": self.event}
        if self.reason is not None:
            line["reason"] = self.reason[:_MAX_FIELD]
        line["at"] = round(self.ended_at, 3)
        return (json.dumps(line, separators=(",", ":"), ensure_ascii=False)
                + "\n").encode("utf-8")


class Outcomes:
    """Outcomes of ended requests, oldest ending first, bounded: those that ended more than
    ``ttl_s`` ago, beyond ``capacity`` or beyond ``max_bytes`` of records are dropped, oldest
    first. Not thread-safe (the journal's lock)."""

    def __init__(self, ttl_s: float, capacity: int, max_bytes: int) -> None:
        self.ttl_s, self.capacity, self.max_bytes = ttl_s, capacity, max_bytes
        self._kept: OrderedDict[str, tuple[Ended, int]] = OrderedDict()
        self.bytes = 0
        """The size of their records."""

    def keep(self, ended: Ended) -> bytes:
        """Remember ``ended`` as the newest (replacing what was known of its id); its record."""
        self.forget(ended.request_id)
        record = ended.record()
        self._kept[ended.request_id] = (ended, len(record))
        self.bytes += len(record)
        self._prune(ended.ended_at)
        return record

    def forget(self, request_id: str) -> None:
        kept = self._kept.pop(request_id, None)
        if kept is not None:
            self.bytes -= kept[1]

    def values(self, now: float) -> list[Ended]:
        """Those still inside the bounds at Unix time ``now``, oldest first."""
        self._prune(now)
        return [ended for ended, _ in self._kept.values()]

    def _prune(self, now: float) -> None:
        while self._kept:
            ended, size = next(iter(self._kept.values()))
            if (now - ended.ended_at <= self.ttl_s and len(self._kept) <= self.capacity
                    and self.bytes <= self.max_bytes):
                return
            self._kept.popitem(last=False)
            self.bytes -= size


def mark(op: str, request_id: str) -> bytes:
    return (json.dumps({"op": op, "id": request_id}, separators=(",", ":"),
                       ensure_ascii=False) + "\n").encode("utf-8")


def _entry(record: _OpenRecord) -> JournalEntry:
    reply = None
    if record.reply is not None:
        try:
            correlation = (None if record.reply.correlation is None else
                           base64.b64decode(record.reply.correlation, validate=True))
            reply = ReplyRoute(Topic(record.reply.topic), correlation)
        except (ValueError, TopicError) as exc:  # answered on the events topic only
            log.warning("request_journal_bad_reply_route", id=record.id, error=str(exc))
    hermes = (None if record.hermes is None else
              HermesOrigin(record.hermes.id, record.hermes.site, record.hermes.session))
    return JournalEntry(record.id, record.command, record.accepted_at, record.deadline, reply,
                        hermes, record.speak, record.replays)


@dataclass(frozen=True, slots=True)
class Journalled:
    """What a journal file holds (:func:`read_records`)."""

    entries: dict[str, JournalEntry]
    """The unfinished requests, in the order accepted."""
    ended: OrderedDict[str, Ended]
    """Outcomes of ended requests, oldest ending first (not yet cut to the repeat window)."""
    bad: int
    """Unreadable lines."""
    torn: bool
    """The last line has no newline (a write cut by a crash); it is ignored."""


def read_records(data: bytes) -> Journalled:
    """Everything ``data`` holds; see :class:`Journalled`."""
    lines = data.split(b"\n")
    torn = lines.pop() != b""
    entries: dict[str, JournalEntry] = {}
    ended: OrderedDict[str, Ended] = OrderedDict()
    bad = 0
    for line in lines:
        try:
            record = _RECORD.validate_json(line)
        except ValidationError:
            bad += 1
            continue
        if isinstance(record, _OpenRecord):
            entries.pop(record.id, None)
            ended.pop(record.id, None)
            entries[record.id] = _entry(record)
        elif record.op == "close":
            entries.pop(record.id, None)
            ended.pop(record.id, None)
            if (record.event is not None and record.event in FINAL_EVENTS
                    and record.at is not None):
                ended[record.id] = Ended(record.id, record.event, record.reason, record.at)
        elif record.id in entries:
            entries[record.id] = replace(entries[record.id], begun=True)
    return Journalled(entries, ended, bad, torn)


def parse(data: bytes) -> tuple[dict[str, JournalEntry], int, bool]:
    """The unfinished entries in ``data`` (in the order accepted), the number of unreadable
    lines, and whether the last line was torn (no newline)."""
    journalled = read_records(data)
    return journalled.entries, journalled.bad, journalled.torn
