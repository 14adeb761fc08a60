"""Hermes (Rhasspy / Snips) text-to-speech compatibility.

``hermes/tts/say`` ``{"text", "siteId", "lang", "id", "sessionId", "volume"}`` is spoken when
``siteId`` is this device's site id (a missing ``siteId`` means Hermes' ``"default"``). When the
utterance ends, ``hermes/tts/sayFinished`` ``{"id", "siteId", "sessionId"}`` is published, as
Rhasspy's dialogue manager waits for it; a failure also publishes ``hermes/error/tts``
``{"error", "context", "siteId", "sessionId"}`` first.

Hermes producers add fields of their own, so unknown fields are ignored here (unlike our own
commands); types, sizes and bounds are still checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.mqtt.client import OutboundMessage
from agent.mqtt.protocol import HARD_MAX_TEXT_CHARS, CommandRejected, SpeakCommand, new_request_id
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY_FINISHED

__all__ = ["DEFAULT_SITE_ID", "HermesOrigin", "HermesRejected", "HermesSay", "parse_say"]

DEFAULT_SITE_ID = "default"
_MAX_FIELD = 256


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
    """An invalid say for this site; ``origin`` addresses the Hermes error when known."""

    def __init__(self, reason: str, origin: HermesOrigin | None) -> None:
        super().__init__(reason, origin.say_id if origin else None, "hermes/tts/say")
        self.origin = origin


def _origin_from_raw(payload: bytes) -> HermesOrigin | None:
    """Best-effort origin of a malformed say, so the error can still be addressed."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None

    def field(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) and len(value) <= _MAX_FIELD else None

    return HermesOrigin(field("id"), field("siteId") or DEFAULT_SITE_ID, field("sessionId"))


def parse_say(payload: bytes, *, site_id: str, max_payload_bytes: int,
              max_text_chars: int) -> tuple[SpeakCommand, HermesOrigin] | None:
    """The speak command for a ``hermes/tts/say`` addressed to ``site_id``, else ``None``.

    Raises :class:`HermesRejected` for a say that is for this site but invalid, or whose
    site cannot be read.
    """
    if len(payload) > max_payload_bytes:
        raise HermesRejected(
            f"payload too large: {len(payload)} bytes, limit {max_payload_bytes}", None)
    try:
        say = HermesSay.model_validate_json(payload)
    except ValidationError as exc:
        origin = _origin_from_raw(payload)
        if origin is not None and origin.site_id != site_id:
            return None
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}".lstrip(": ")
            for err in exc.errors(include_url=False)
        )
        raise HermesRejected(reasons, origin) from exc
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
