"""The command/event protocol: strict pydantic schemas and the parser for inbound commands.

Commands are JSON objects; unknown fields, wrong types and out-of-range values are refused
(``extra="forbid"``, strict types, bounds on every field). A command that fails any check
becomes a :class:`CommandRejected` carrying a readable reason; the caller answers it with a
``rejected`` event and changes nothing. No field is ever used as a path or passed to a shell.

The events' schemas live in :mod:`agent.mqtt.wire_events` and are named here too, so that
the protocol has one front door.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Final, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from agent.jsonbound import depth_error
from agent.mqtt.clock_offset import MAX_SENT_MS
from agent.mqtt.salvage import top_level_strings
from agent.mqtt.wire_events import (
    FINAL_EVENTS,
    CommandEvent,
    EventBase,
    ModelEvent,
    PingStatus,
    Presence,
    Priority,
    to_payload,
)
from agent.outcomes import EventName
from agent.text.limits import HARD_MAX_TEXT_CHARS, text_problem

__all__ = [
    "COMMANDS",
    "FINAL_EVENTS",
    "HARD_MAX_TEXT_CHARS",
    "Command",
    "CommandEvent",
    "CommandName",
    "CommandRejected",
    "EventBase",
    "EventName",
    "ModelEvent",
    "PingCommand",
    "PingStatus",
    "Presence",
    "Priority",
    "ReloadCommand",
    "RequestId",
    "SpeakCommand",
    "StopCommand",
    "VolumeCommand",
    "describe_json_error",
    "new_request_id",
    "parse_command",
    "salvage_id",
    "to_payload",
    "valid_request_id",
]

MAX_REASON_CHARS: Final = 500

_REQUEST_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
RequestId = Annotated[str, StringConstraints(pattern=_REQUEST_ID_PATTERN)]
"""Request ids: 1-128 characters of letters, digits and ``_ . : @ -`` (UUIDs fit)."""
_REQUEST_ID = re.compile(_REQUEST_ID_PATTERN)
_VoiceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
_Version = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")]


CommandName = Literal["speak", "stop", "volume", "reload", "ping"]
def new_request_id() -> str:
    """An id for a command that came without one."""
    return uuid.uuid4().hex


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: RequestId | None = Field(
        default=None, description="Request id echoed in every event; generated when absent."
    )


class SpeakCommand(_Command):
    """``speak``: synthesize ``text`` and play it."""

    text: str = Field(min_length=1, max_length=HARD_MAX_TEXT_CHARS, description="What to say.")
    voice: _VoiceName | None = Field(default=None, description="Voice name; unset = default.")
    priority: Priority = Field(
        default="normal", description="low/normal/high/urgent; urgent interrupts and goes first."
    )
    volume: float | None = Field(default=None, ge=0.0, le=1.0, description="This request's volume.")
    speed: float | None = Field(
        default=None, ge=0.25, le=4.0,
        description="Speaking rate relative to the voice default (2.0 = twice as fast).",
    )
    chime: str | None = Field(
        default=None, max_length=64, pattern=r"^$|^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
        description="A chime from the chimes directory played right before the speech, as one "
        "utterance (docs/chimes.md); unset: the priority's default chime (`chimes.by_priority`), "
        "if any; \"\": no chime. An unknown chime is `rejected`.",
    )
    ssml: bool | None = Field(
        default=None, description="true: `text` is SSML (a `<speak>` document, see docs/text.md); "
        "false: plain text even if it starts with `<speak`; unset: SSML when it starts with "
        "`<speak` (after whitespace). Invalid or unsupported markup is `rejected`.",
    )
    expires_in_s: float | None = Field(
        default=None, gt=0.0, le=86_400.0,
        description="Drop the request if it has not started playing this long after receipt (s).",
    )
    expires_at: float | None = Field(
        default=None, gt=0.0, description="Drop the request if not started by this Unix time (s).",
    )
    at: float | None = Field(default=None, gt=0.0, description="Unix time (ms) the first "
                             "sample must reach the speaker: a synchronized group speak "
                             "(fleet.md#synchronized-group-speech); at most an hour ahead.")

    @field_validator("text")
    @classmethod
    def _check_text(cls, text: str, info: ValidationInfo) -> str:
        """The admission's text bounds (:func:`agent.text.limits.text_problem`)."""
        problem = text_problem(text, (info.context or {}).get("max_text_chars",
                                                              HARD_MAX_TEXT_CHARS))
        if problem is not None:
            raise ValueError(problem[1])
        return text


class StopCommand(_Command):
    """``stop``: cut the current utterance; with ``clear_queue`` also drop everything queued."""

    clear_queue: bool = Field(default=False, description="Also drop queued requests.")


class VolumeCommand(_Command):
    """``volume``: set the device volume."""

    volume: float = Field(ge=0.0, le=1.0, description="Device volume 0.0-1.0.")


class ReloadCommand(_Command):
    """``reload``: re-check the models directory now (optionally a voice / target version)."""

    voice: _VoiceName | None = Field(default=None, description="Only this voice.")
    version: _Version | None = Field(default=None, description="Switch to this staged version.")


class PingCommand(_Command):
    """``ping``: answer at once with a small status."""

    sent_ms: float | None = Field(
        default=None, gt=0.0, le=MAX_SENT_MS, allow_inf_nan=False,
        description="The sender's Unix time (ms) when it sent the ping: the device reports its "
        "arrival less this in health (`sync.controller`, fleet.md#synchronized-group-speech).")


Command = SpeakCommand | StopCommand | VolumeCommand | ReloadCommand | PingCommand
COMMANDS: Final[dict[str, type[_Command]]] = {
    "speak": SpeakCommand,
    "stop": StopCommand,
    "volume": VolumeCommand,
    "reload": ReloadCommand,
    "ping": PingCommand,
}


class CommandRejected(Exception):
    """An inbound command that cannot be accepted; ``reason`` is meant for the sender."""

    def __init__(self, reason: str, request_id: str | None = None,
                 command: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason[:MAX_REASON_CHARS]
        self.request_id = request_id
        self.command = command


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown field {loc!r}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def valid_request_id(value: object) -> str | None:
    """``value`` when it is a string with the request id syntax (ASCII only, so never a lone
    surrogate or a replacement character), else ``None``."""
    return value if isinstance(value, str) and _REQUEST_ID.fullmatch(value) else None


def salvage_id(payload: bytes, *, max_bytes: int = 65_536) -> str | None:
    """The sender's ``id`` from a payload that failed validation, if it can be read safely.

    Bounded work whatever the payload (:func:`agent.mqtt.salvage.top_level_strings` looks at
    its first ``max_bytes`` bytes once): a top-level ``"id"`` string with the id syntax is
    found even when the payload is not UTF-8, is cut off, nests too deeply or holds a number
    no parser takes.
    """
    found = top_level_strings(payload, ("id",), max_bytes=max_bytes)
    return None if found is None else valid_request_id(found.strings.get("id"))


def describe_json_error(message: str) -> str:
    """The reason for a payload the JSON parser refused (pydantic's ``json_invalid`` message)."""
    if message.startswith("nested too deeply"):  # agent.jsonbound's
        return f"malformed JSON: {message}"
    if "recursion limit" in message:
        return f"malformed JSON: nested too deeply ({message})"
    return f"malformed JSON: {message}"


def parse_command(name: str, payload: bytes, *, max_payload_bytes: int,
                  max_text_chars: int) -> Command:
    """Validate one inbound command. Raises :class:`CommandRejected` with the reason.

    An empty payload means ``{}`` (handy for ``ping``). The returned command always has
    an ``id`` (generated when the sender gave none).
    """
    command_name = name if len(name) <= 64 else name[:64] + "..."
    if len(payload) > max_payload_bytes:
        raise CommandRejected(
            f"payload too large: {len(payload)} bytes, limit {max_payload_bytes}",
            salvage_id(payload, max_bytes=max_payload_bytes), command_name,
        )
    model = COMMANDS.get(name)
    if model is None:
        raise CommandRejected(
            f"unknown command {command_name!r}; known: {', '.join(COMMANDS)}",
            salvage_id(payload, max_bytes=max_payload_bytes), command_name,
        )
    try:
        text = payload.decode("utf-8") if payload else "{}"
    except UnicodeDecodeError as exc:
        raise CommandRejected(f"payload is not UTF-8: {exc.reason}",
                              salvage_id(payload, max_bytes=max_payload_bytes), name) from exc
    too_deep = depth_error(text)
    if too_deep is not None:
        raise CommandRejected(describe_json_error(too_deep),
                              salvage_id(payload, max_bytes=max_payload_bytes), name)
    try:
        command = model.model_validate_json(text, context={"max_text_chars": max_text_chars})
    except ValidationError as exc:
        if any(err["type"] == "json_invalid" for err in exc.errors()):
            reason = describe_json_error(exc.errors()[0]["msg"])
        elif any(err["type"] == "model_type" for err in exc.errors()):
            reason = "payload must be a JSON object"
        else:
            reason = _describe(exc)
        raise CommandRejected(reason, salvage_id(payload, max_bytes=max_payload_bytes),
                              name) from exc
    if command.id is None:
        command = command.model_copy(update={"id": new_request_id()})
    return cast(Command, command)  # COMMANDS only holds Command types
