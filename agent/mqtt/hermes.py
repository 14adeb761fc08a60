"""Hermes (Rhasspy / Snips) text-to-speech compatibility.

``hermes/tts/say`` for this device's site id becomes a ``speak`` command; its end is answered
on ``hermes/tts/sayFinished`` (after ``hermes/error/tts`` for a failure), also for a say that
cannot be parsed when its ``siteId`` can be read (:mod:`agent.mqtt.salvage`). Unknown fields
are ignored. The wire: docs/mqtt-protocol.md#hermes-rhasspy--snips; the design:
docs/internals.md#hermes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.jsonbound import depth_error
from agent.mqtt.client import OutboundMessage
from agent.mqtt.protocol import (
    HARD_MAX_TEXT_CHARS,
    CommandRejected,
    SpeakCommand,
    describe_json_error,
    new_request_id,
    valid_request_id,
)
from agent.mqtt.salvage import top_level_strings
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY_FINISHED

__all__ = ["DEFAULT_SITE_ID", "HermesOrigin", "HermesRejected", "HermesSay", "parse_say"]

DEFAULT_SITE_ID = "default"
_MAX_FIELD = 256
_ORIGIN_KEYS = ("id", "siteId", "sessionId")


class HermesSay(BaseModel):
    """A ``hermes/tts/say`` payload."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    text: str = Field(min_length=1, max_length=HARD_MAX_TEXT_CHARS)
    site_id: str = Field(default=DEFAULT_SITE_ID, alias="siteId", max_length=_MAX_FIELD)
    lang: str | None = Field(default=None, max_length=64)
    id: str | None = Field(default=None, max_length=_MAX_FIELD)
    session_id: str | None = Field(default=None, alias="sessionId", max_length=_MAX_FIELD)
    volume: float | None = Field(default=None, ge=0.0, le=1.0)


@dataclass(frozen=True, slots=True)
class HermesOrigin:
    """What a Hermes answer must echo back."""

    say_id: str | None
    site_id: str
    session_id: str | None

    def finished(self) -> OutboundMessage:
        payload = {"id": self.say_id, "siteId": self.site_id, "sessionId": self.session_id}
        return OutboundMessage(HERMES_SAY_FINISHED, json.dumps(payload).encode("utf-8"))

    def error(self, reason: str, context: str | None = None) -> OutboundMessage:
        payload = {"error": reason, "context": context or self.say_id, "siteId": self.site_id,
                   "sessionId": self.session_id}
        return OutboundMessage(HERMES_ERROR, json.dumps(payload).encode("utf-8"))


class HermesRejected(CommandRejected):
    """An invalid say for this site; ``origin`` addresses the Hermes error when known.

    The request id of our own ``rejected`` event is the say's id when it has the request id
    syntax (else the intake generates one): a Hermes id may be any string.
    """

    def __init__(self, reason: str, origin: HermesOrigin | None,
                 request_id: str | None = None) -> None:
        say_id = origin.say_id if origin is not None else request_id
        super().__init__(reason, valid_request_id(say_id), "hermes/tts/say")
        self.origin = origin


def _rejection(payload: bytes, reason: str, *, site_id: str,
               max_bytes: int) -> HermesRejected | None:
    """The rejection of a say that failed to parse, addressed to its origin when that can be
    read; ``None`` when the say is for another site (it is ignored)."""
    found = top_level_strings(payload, _ORIGIN_KEYS, max_bytes=max_bytes)
    if found is None:  # not a JSON object: whose say it is cannot be told
        return HermesRejected(reason, None)

    def field(name: str) -> str | None:
        value = found.strings.get(name)
        return value if value is not None and len(value) <= _MAX_FIELD else None

    site = field("siteId")
    if site is None and not found.closed:  # its siteId may be in the part not looked at
        return HermesRejected(reason, None, field("id"))
    origin = HermesOrigin(field("id"), site or DEFAULT_SITE_ID, field("sessionId"))
    return HermesRejected(reason, origin) if origin.site_id == site_id else None


def _reasons(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        if err["type"] == "json_invalid":
            parts.append(describe_json_error(err["msg"]))
            continue
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def parse_say(payload: bytes, *, site_id: str, max_payload_bytes: int,
              max_text_chars: int) -> tuple[SpeakCommand, HermesOrigin] | None:
    """The speak command for a ``hermes/tts/say`` addressed to ``site_id``, else ``None``.

    Raises :class:`HermesRejected` for a say that is for this site but invalid, or whose
    site cannot be read (not a JSON object, or over the size limit before its ``siteId``).
    """
    if len(payload) > max_payload_bytes:
        rejection = _rejection(
            payload, f"payload too large: {len(payload)} bytes, limit {max_payload_bytes}",
            site_id=site_id, max_bytes=max_payload_bytes)
        if rejection is None:
            return None
        raise rejection
    too_deep = depth_error(payload)  # bounded before pydantic's parser (agent.jsonbound)
    if too_deep is not None:
        rejection = _rejection(payload, describe_json_error(too_deep), site_id=site_id,
                               max_bytes=max_payload_bytes)
        if rejection is None:
            return None
        raise rejection
    try:
        say = HermesSay.model_validate_json(payload)
    except ValidationError as exc:
        rejection = _rejection(payload, _reasons(exc), site_id=site_id,
                               max_bytes=max_payload_bytes)
        if rejection is None:
            return None
        raise rejection from exc
    if say.site_id != site_id:
        return None
    origin = HermesOrigin(say.id, say.site_id, say.session_id)
    try:
        command = SpeakCommand.model_validate(
            {"id": say.id or new_request_id(), "text": say.text, "volume": say.volume},
            context={"max_text_chars": max_text_chars},
        )
    except ValidationError:
        try:  # the Hermes id may not fit our id syntax: speak under our own id
            command = SpeakCommand.model_validate(
                {"id": new_request_id(), "text": say.text, "volume": say.volume},
                context={"max_text_chars": max_text_chars},
            )
        except ValidationError as exc:
            reason = "; ".join(err["msg"].removeprefix("Value error, ")
                               for err in exc.errors(include_url=False))
            raise HermesRejected(reason, origin) from exc
    return command, origin
