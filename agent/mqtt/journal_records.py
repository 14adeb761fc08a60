"""The request journal's records: one JSON object per line (:mod:`agent.mqtt.journal`).

- ``{"op": "open", "v": 1, "id", "command", "accepted_at", "deadline", "reply", "hermes",
  "speak", "replays"}``: what is needed to answer the request (its reply route with the
  Correlation Data in base64, the Hermes origin, the Unix times it was accepted and must start
  playing by) and, only with replay on, what to say (``speak``); the last ``open`` of an id wins;
- ``{"op": "begun", "id"}``: the synthesis worker took the request up;
- ``{"op": "close", "id"}``: its final event is being published.

Reading checks every record as strictly as a command (pydantic, unknown fields refused, every
string bounded); a line that fails is counted, never trusted.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent.logs import get_logger
from agent.mqtt.hermes import HermesOrigin
from agent.mqtt.publisher import ReplyRoute
from agent.mqtt.topics import Topic, TopicError

__all__ = ["JournalEntry", "mark", "parse"]

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
    speak: dict[str, str | float | None] | None = Field(default=None, max_length=16)
    replays: int = Field(default=0, ge=0, le=1000)


class _MarkRecord(_Model):
    op: Literal["begun", "close"]
    id: str = Field(min_length=1, max_length=_MAX_FIELD)


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
    """``text``, ``voice``, ``priority``, ``volume``, ``speed`` (replay on only)."""
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


def parse(data: bytes) -> tuple[dict[str, JournalEntry], int, bool]:
    """The unfinished entries in ``data`` (in the order accepted), the number of unreadable
    lines, and whether the last line was torn (no newline)."""
    lines = data.split(b"\n")
    torn = lines.pop() != b""
    entries: dict[str, JournalEntry] = {}
    bad = 0
    for line in lines:
        try:
            record = _RECORD.validate_json(line)
        except ValidationError:
            bad += 1
            continue
        if isinstance(record, _OpenRecord):
            entries.pop(record.id, None)
            entries[record.id] = _entry(record)
        elif record.op == "close":
            entries.pop(record.id, None)
        elif record.id in entries:
            entries[record.id] = replace(entries[record.id], begun=True)
    return entries, bad, torn
