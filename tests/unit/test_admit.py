"""The one admission of every front door (agent.pipeline.admit) and the bounded JSON parse
(agent.jsonbound): every refusal code, the admitted request, in one process."""

from __future__ import annotations

import json
import time

import pytest

from agent import jsonbound
from agent.audio.item import PRIORITIES
from agent.pipeline.admit import Admitted, Ask, Code, Context, Refusal, admit
from agent.text.document import Document, Pause
from agent.text.limits import HARD_MAX_TEXT_CHARS, text_problem
from agent.text.scripts import speech_problem

LANGUAGES = {"en-voice": ("en-us",), "zh-voice": ("cmn",)}


def speakable(document: Document, voice: str) -> str | None:
    return speech_problem(document, voice, LANGUAGES, drop_symbols=True)


def chime_problem(name: str) -> str | None:
    return None if name in ("ding", "alert") else f"unknown chime {name!r} (available: alert, ding)"


CONTEXT = Context(max_text_chars=50, default_voice="en-voice", voices=lambda: list(LANGUAGES),
                  sounds=lambda: ("ding", "alert"), chime_problem=chime_problem,
                  chime_default={"urgent": "alert", "high": "gone"}.get, speakable=speakable)


def refusal(ask: Ask, context: Context = CONTEXT) -> Refusal:
    result = admit(ask, context)
    assert isinstance(result, Refusal), result
    assert "\n" not in result.reason
    return result


@pytest.mark.parametrize(("ask", "code", "reason"), [
    (Ask(None), Code.BAD_REQUEST, "text must be a string"),
    (Ask(5), Code.BAD_REQUEST, "text must be a string"),
    (Ask(" \n\t"), Code.EMPTY_TEXT, "text is empty"),
    (Ask("a\0b"), Code.BAD_TEXT, "text contains a NUL character"),
    (Ask("\ud800 lone \udfff"), Code.BAD_TEXT, "lone surrogate"),
    (Ask("x" * 51), Code.TEXT_TOO_LONG, "text is longer than 50 characters (51)"),
    (Ask("<speak>Hi"), Code.BAD_SSML, "malformed SSML"),
    (Ask("Hello", ssml=True), Code.BAD_SSML, "malformed SSML"),
    (Ask('<speak><audio src="gong"/></speak>'), Code.BAD_SSML, "unknown chime 'gong'"),
    (Ask("Hi.", chime="gong"), Code.UNKNOWN_CHIME, "unknown chime 'gong' (available: alert"),
    (Ask("Hi.", priority="bogus"), Code.BAD_REQUEST, "unknown priority 'bogus'"),
    (Ask("Hi.", priority=5000), Code.BAD_REQUEST, "out of range"),
    (Ask("Hi.", volume=1.5), Code.BAD_REQUEST, "volume 1.5 outside 0.0-1.0"),
    (Ask("Hi.", speed=0.0), Code.BAD_REQUEST, "must be positive"),
    (Ask("Hi.", voice="nobody"), Code.UNKNOWN_VOICE,
     "unknown voice 'nobody' (installed: en-voice, zh-voice)"),
    (Ask('<speak><voice name="ghost">Hi.</voice></speak>'), Code.UNKNOWN_VOICE,
     "unknown voice 'ghost' in <voice name>"),
    (Ask("你好。"), Code.UNSPEAKABLE_TEXT, "installed voices that can: zh-voice"),
    (Ask("\U0001f389\U0001f389"), Code.UNSPEAKABLE_TEXT, "text has nothing to speak"),
    (Ask("Hi.", expires_in_s=1.0, received=time.monotonic() - 2), Code.EXPIRED,
     "expired before it was accepted"),
    (Ask("Hi.", expires_at=time.time() - 1), Code.EXPIRED, "expired before it was accepted"),
    (Ask("Hi.", deadline=time.monotonic() - 0.1), Code.EXPIRED, "expired"),
], ids=lambda v: v.value if isinstance(v, Code) else None)
def test_every_refusal_has_its_code_and_reason(ask: Ask, code: Code, reason: str) -> None:
    refused = refusal(ask)
    assert refused.code is code and reason in refused.reason, refused


def test_every_code_is_covered_and_codes_are_wyoming_error_words() -> None:
    assert {c.value for c in Code} == {
        "bad-request", "empty-text", "text-too-long", "bad-text", "bad-ssml", "unknown-voice",
        "unspeakable-text", "unknown-chime", "expired"}


def test_an_admitted_speak_carries_its_request_deadline_and_voice() -> None:
    now = time.monotonic()
    admitted = admit(Ask('<speak>One.<break time="1s"/>Two.</speak>', priority="urgent",
                         volume=0.5, speed=1.5, received=now, expires_in_s=30.0,
                         deadline=now + 10), CONTEXT)
    assert isinstance(admitted, Admitted)
    request = admitted.request
    assert request.document is not None and Pause(1.0) in tuple(request.document)
    assert (request.priority, request.volume, request.speed) == (PRIORITIES["urgent"], 0.5, 1.5)
    assert request.chime == "alert"  # urgent's default chime
    assert request.voice is None and admitted.voice == "en-voice"  # the default voice
    assert admitted.deadline == now + 10  # the earliest
    plain = admit(Ask("<speak>as written", ssml=False, voice="zh-voice", chime=""),
                  Context(max_text_chars=50, voices=lambda: list(LANGUAGES)))
    assert isinstance(plain, Admitted) and plain.request.document is None
    assert (plain.request.chime, plain.deadline, plain.voice) == (None, None, "zh-voice")


def test_a_default_chime_that_is_missing_is_left_out() -> None:
    admitted = admit(Ask("Hi.", priority="high"), CONTEXT)  # "gone" is not there
    assert isinstance(admitted, Admitted) and admitted.request.chime is None
    named = admit(Ask("Hi.", priority="high", chime="ding"), CONTEXT)
    assert isinstance(named, Admitted) and named.request.chime == "ding"


def test_checks_without_a_context_are_not_made() -> None:
    admitted = admit(Ask("Hi.", voice="nobody", chime="gong"), Context(max_text_chars=10))
    assert isinstance(admitted, Admitted) and admitted.request.chime == "gong"


def test_the_text_bounds_are_one_check() -> None:
    assert text_problem("x" * HARD_MAX_TEXT_CHARS, HARD_MAX_TEXT_CHARS) is None
    assert text_problem("x" * 11, 10) == ("text-too-long", "text is longer than 10 characters (11)")
    assert text_problem("   ", 10) == ("empty-text", "text is empty")


# -- agent.jsonbound ----------------------------------------------------------------------------

@pytest.mark.parametrize("deep", [b"[" * 100_000, b"{" * 100_000, b'{"a":' * 201,
                                  b"[" * 201 + b"]" * 201])
def test_deep_json_is_refused_before_the_parser(deep: bytes) -> None:
    with pytest.raises(jsonbound.TooDeep, match="nested too deeply: more than 200 levels"):
        jsonbound.loads(deep, max_bytes=1 << 20)


def test_bounded_json_within_the_bounds_is_parsed() -> None:
    nested = b"[" * 200 + b"]" * 200
    assert jsonbound.loads(nested, max_bytes=1000) == json.loads(nested)
    brackets = json.dumps({"text": "[" * 5000 + "{\\\"" * 100}).encode()
    assert jsonbound.loads(brackets, max_bytes=1 << 20) == json.loads(brackets)  # in a string
    assert jsonbound.depth_error(b'"unterminated [[[[') is None  # the parser says what is wrong


@pytest.mark.parametrize(("data", "why"), [
    (b"[1]" + b" " * 100, "JSON too large: 103 bytes, limit 100"),
    (b'"\xff"', "not UTF-8"),
    (b"{nope", "malformed JSON"),
])
def test_bounded_json_errors_are_one_line(data: bytes, why: str) -> None:
    with pytest.raises(jsonbound.JsonError, match=why) as caught:
        jsonbound.loads(data, max_bytes=100)
    assert not isinstance(caught.value, jsonbound.TooDeep)


@pytest.mark.parametrize(("data", "why"), [
    (b"9" * 5000, "number too long: 5000 characters, limit 100"),  # int() would refuse it
    (b'{"rate": ' + b"1" * 101 + b"}", "number too long: 101 characters"),
    (b"[0." + b"0" * 200 + b"1]", "number too long: 203 characters"),
    (b"[1e999]", "number out of range: 1e999"),
    (b'{"x": NaN}', "not a JSON number: NaN"),
    (b"-Infinity", "not a JSON number: -Infinity"),
])
def test_bounded_json_refuses_numbers_no_config_has(data: bytes, why: str) -> None:
    """Numbers are bounded too: a long literal never reaches ``int()`` (whose 4,300-digit
    limit raises a ValueError about sys.set_int_max_str_digits), nor NaN, nor infinity."""
    with pytest.raises(jsonbound.JsonError, match=why):
        jsonbound.loads(data, max_bytes=1 << 20)
    big = int("9" * jsonbound.MAX_NUMBER_CHARS)
    assert jsonbound.loads(json.dumps([big, -1.5e300]), max_bytes=1000) == [big, -1.5e300]
