"""One admission for every front door: what a speak asks (:class:`Ask`) becomes an
:class:`Admitted` request or one :class:`Refusal` with a code from :class:`Code`.

MQTT ``speak``, Hermes, the Home Assistant notify topic, Wyoming and ``tts-agent say``/``synth``
all call :func:`admit`; a door only maps its wire format in and the refusal out (a ``rejected``
or ``expired`` event, a Wyoming ``error`` event, exit status 2). What the pipeline may not
import (the voice library, the chimes, settings) comes in through :class:`Context`. The text
bounds are :mod:`agent.text.limits`. See docs/mqtt-protocol.md (refusals).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import StrEnum

from agent.audio.item import parse_priority
from agent.logs import get_logger
from agent.pipeline.jobs import SpeakRequest
from agent.text.document import Document, looks_like_ssml, plain
from agent.text.limits import text_problem
from agent.voice.voice import SynthesisParams

__all__ = ["Admitted", "Ask", "Code", "Context", "Refusal", "admit", "chime_of", "deadline_of",
           "document_of", "text_refusal", "voice_refusal"]

log = get_logger(__name__)


class Code(StrEnum):
    """Why a speak is refused; the same words on every door (Wyoming's ``error`` codes)."""

    BAD_REQUEST = "bad-request"
    """A field of the wrong type or out of range (priority, volume, speed)."""
    EMPTY_TEXT = "empty-text"
    TEXT_TOO_LONG = "text-too-long"
    BAD_TEXT = "bad-text"
    """Text that can never be said (a NUL character)."""
    BAD_SSML = "bad-ssml"
    UNKNOWN_VOICE = "unknown-voice"
    UNSPEAKABLE_TEXT = "unspeakable-text"
    """A script its voices cannot read, or nothing left to say once symbols are dropped."""
    UNKNOWN_CHIME = "unknown-chime"
    EXPIRED = "expired"
    """Its deadline passed before it was admitted (MQTT answers ``expired``)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A speak that is not admitted: its code and the one-line reason for the sender."""

    code: Code
    reason: str


MAX_START_AHEAD_S = 3600
"""How far ahead a synchronized start (``at``) may be."""

@dataclass(frozen=True, slots=True)
class Ask:
    """What a speak asks, whatever door it came through."""

    text: object
    """What to say (a door passes what it received: anything but a string is refused)."""
    ssml: bool | None = None
    """True: ``text`` is SSML; False: plain even if it starts with ``<speak``; None: SSML when
    it starts with ``<speak``."""
    voice: str | None = None
    """None: the default voice."""
    priority: str | int = "normal"
    volume: float | None = None
    speed: float | None = None
    chime: str | None = None
    """A chime to play first; None: the priority's default chime; ``""``: none."""
    params: SynthesisParams = field(default_factory=SynthesisParams)
    received: float | None = None
    """``time.monotonic()`` when the door received it (for ``expires_in_s``)."""
    expires_in_s: float | None = None
    expires_at: float | None = None
    """Unix time (s)."""
    deadline: float | None = None
    """A monotonic deadline of the transport's own (MQTT Message Expiry)."""
    at_ms: float | None = None
    """A synchronized start: Unix time in ms its first sample must reach the speaker."""


@dataclass(frozen=True, slots=True)
class Context:
    """What admission checks against, handed in by the door; a ``None`` check is not made."""

    max_text_chars: int
    default_voice: str | None = None
    voices: Callable[[], Collection[str]] | None = None
    """The installed voice names (``voice`` and SSML ``<voice name>`` must be one)."""
    sounds: Callable[[], Collection[str]] | None = None
    """The chimes an SSML ``<audio src>`` may name."""
    chime_problem: Callable[[str], str | None] | None = None
    """Why the chime ``name`` cannot be played (``unknown chime ...``), or None."""
    chime_default: Callable[[str], str | None] | None = None
    """The chime of a priority level's name (``chimes.by_priority``), or None."""
    speakable: Callable[[Document, str], str | None] | None = None
    """Why a document cannot be said by the voice named (a script, nothing to say), or None."""
    now: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class Admitted:
    """An admitted speak: the pipeline's request, its deadline and the voice it names."""

    request: SpeakRequest
    deadline: float | None
    """``time.monotonic()`` by which it must start playing, or None."""
    voice: str | None
    """``ask.voice`` or the context's default voice."""


def text_refusal(text: object, max_chars: int) -> Refusal | None:
    """The refusal of a text outside the bounds (:func:`agent.text.limits.text_problem`:
    not a string, empty, a NUL character, too long)."""
    problem = text_problem(text, max_chars)
    return None if problem is None else Refusal(Code(problem[0]), problem[1])


def document_of(text: str, ssml: bool | None, max_chars: int,
                sounds: Collection[str] | None = None) -> Document | Refusal | None:
    """The SSML document of ``text`` (``ssml``, or unset and it starts with ``<speak``), None
    for plain text, or the refusal of markup that is invalid or unsupported."""
    if not (looks_like_ssml(text) if ssml is None else ssml):
        return None
    from agent.text.ssml import SsmlError, parse_ssml  # the parser: only for markup

    try:
        return parse_ssml(text, max_chars=max_chars, sounds=sounds)
    except SsmlError as exc:
        return Refusal(Code.BAD_SSML, str(exc))


def chime_of(ask: Ask, context: Context) -> str | Refusal | None:
    """The chime a speak plays first: its own, else its priority's default (a default that is
    not there is left out and logged); a chime it names that is not there is refused."""
    if ask.chime == "":
        return None
    problem = context.chime_problem
    if ask.chime is not None:
        why = None if problem is None else problem(ask.chime)
        return ask.chime if why is None else Refusal(Code.UNKNOWN_CHIME, why)
    level = ask.priority if isinstance(ask.priority, str) else "normal"
    default = None if context.chime_default is None else context.chime_default(level)
    if default is not None and problem is not None and (why := problem(default)) is not None:
        log.warning("default_chime_missing", chime=default, priority=level, reason=why)
        return None
    return default


def deadline_of(ask: Ask, now: Callable[[], float] = time.monotonic) -> float | None:
    """The earliest of the transport's deadline, ``expires_in_s`` after receipt and
    ``expires_at`` (Unix time, converted through the clocks as they are now), or None."""
    candidates = [] if ask.deadline is None else [ask.deadline]
    if ask.expires_in_s is not None:
        candidates.append((now() if ask.received is None else ask.received) + ask.expires_in_s)
    if ask.expires_at is not None:
        candidates.append(now() + (ask.expires_at - time.time()))
    return min(candidates) if candidates else None


def voice_refusal(voice: str | None, text: str, document: Document | None,
                  context: Context) -> Refusal | None:
    """The refusal of a voice that is not installed (``voice`` or an SSML ``<voice name>``),
    or of text the voice cannot say (:attr:`Context.speakable`)."""
    refused = _unknown_voice(voice, document, context)
    if refused is None and context.speakable is not None and voice is not None:
        problem = context.speakable(document or plain(text), voice)
        refused = None if problem is None else Refusal(Code.UNSPEAKABLE_TEXT, problem)
    return refused


def _unknown_voice(voice: str | None, document: Document | None,
                   context: Context) -> Refusal | None:
    if context.voices is None:
        return None
    installed = list(context.voices())
    named = set() if document is None else document.voices()
    unknown = [v for v in (voice, *sorted(v for v in named if v))
               if v is not None and v not in installed]
    if not unknown:
        return None
    have = ", ".join(installed) or "none"
    where = "" if unknown[0] == voice else " in <voice name>"
    return Refusal(Code.UNKNOWN_VOICE, f"unknown voice {unknown[0]!r}{where} (installed: {have})")


def _request(ask: Ask, text: str, document: Document | None,
             chime: str | None) -> SpeakRequest | Refusal:
    if ask.at_ms is not None and ask.at_ms / 1000 - time.time() > MAX_START_AHEAD_S:
        return Refusal(Code.BAD_REQUEST, f"start time `at` is more than "
                       f"{MAX_START_AHEAD_S // 60} minutes ahead (is it in ms?)")
    try:
        return SpeakRequest(text=text, voice=ask.voice, priority=parse_priority(ask.priority),
                            volume=ask.volume, speed=ask.speed, params=ask.params,
                            chime=chime, document=document,
                            start_at=None if ask.at_ms is None else ask.at_ms / 1000)
    except ValueError as exc:  # a priority, volume or speed out of range
        return Refusal(Code.BAD_REQUEST, str(exc))


def _what(ask: Ask, context: Context) -> SpeakRequest | Refusal:
    """What to say: the text within its bounds, its SSML document, the chime, the fields."""
    refused = text_refusal(ask.text, context.max_text_chars)
    if refused is not None:
        return refused
    text = str(ask.text)
    sounds = None if context.sounds is None else context.sounds()
    document = document_of(text, ask.ssml, context.max_text_chars, sounds)
    if isinstance(document, Refusal):
        return document
    chime = chime_of(ask, context)
    if isinstance(chime, Refusal):
        return chime
    return _request(ask, text, document, chime)


def admit(ask: Ask, context: Context) -> Admitted | Refusal:
    """Admit ``ask`` or refuse it, in this order: text bounds, SSML, chime, priority and
    the other fields, voice, speech (script), expiry. Runs on the door's own thread (the
    SSML is parsed here); it loads no voice."""
    request = _what(ask, context)
    if isinstance(request, Refusal):
        return request
    voice = ask.voice or context.default_voice
    refused = voice_refusal(voice, request.text, request.document, context)
    if refused is not None:
        return refused
    deadline = deadline_of(ask, context.now)
    if deadline is not None and context.now() >= deadline:
        return Refusal(Code.EXPIRED, "expired before it was accepted")
    return Admitted(request, deadline, voice)
