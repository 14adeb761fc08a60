"""Command schemas: strict, bounded, with readable reasons; events serialise as documented."""

from __future__ import annotations

import json

import pytest

from agent.mqtt.hermes import HermesOrigin, HermesRejected, parse_say
from agent.mqtt.protocol import (
    CommandEvent,
    CommandRejected,
    PingCommand,
    SpeakCommand,
    StopCommand,
    VolumeCommand,
    describe_json_error,
    parse_command,
    salvage_id,
    to_payload,
)
from agent.mqtt.salvage import top_level_strings


def parse(name: str, payload: bytes | str, limit: int = 4096, text_limit: int = 100) -> object:
    data = payload.encode() if isinstance(payload, str) else payload
    return parse_command(name, data, max_payload_bytes=limit, max_text_chars=text_limit)


def test_speak_full() -> None:
    cmd = parse("speak", json.dumps({
        "id": "r-1", "text": "Doors closing.", "voice": "en_US-joe-medium", "priority": "urgent",
        "volume": 0.5, "speed": 1.5, "expires_in_s": 30, "expires_at": 1.9e9,
    }))
    assert cmd == SpeakCommand(id="r-1", text="Doors closing.", voice="en_US-joe-medium",
                               priority="urgent", volume=0.5, speed=1.5, expires_in_s=30.0,
                               expires_at=1.9e9)


def test_missing_id_is_generated_and_unique() -> None:
    first = parse("speak", '{"text": "a"}')
    second = parse("speak", '{"text": "a"}')
    assert isinstance(first, SpeakCommand) and isinstance(second, SpeakCommand)
    assert first.id and second.id and first.id != second.id


def test_other_commands() -> None:
    stop = parse("stop", '{"id": "s", "clear_queue": true}')
    assert stop == StopCommand(id="s", clear_queue=True)
    assert parse("volume", '{"id": "v", "volume": 0.25}') == VolumeCommand(id="v", volume=0.25)
    ping = parse("ping", b"")
    assert isinstance(ping, PingCommand) and ping.id


@pytest.mark.parametrize(
    ("name", "payload", "reason"),
    [
        ("speak", "{not json", "malformed JSON"),
        ("speak", "[1, 2]", "payload must be a JSON object"),
        ("speak", '{"text": ""}', "text"),
        ("speak", '{"text": "   "}', "text is empty"),
        ("speak", '{"text": "a", "colour": "red"}', "unknown field 'colour'"),
        ("speak", '{"text": "a", "volume": 2}', "volume"),
        ("speak", '{"text": "a", "volume": "0.5"}', "volume"),
        ("speak", '{"text": "a", "priority": "asap"}', "priority"),
        ("speak", '{"text": "a", "voice": "../../etc/passwd"}', "voice"),
        ("speak", '{"text": "a", "id": "has space"}', "id"),
        ("speak", json.dumps({"text": "x" * 101}), "longer than 100 characters"),
        ("speak", '{"text": 5}', "text"),
        ("volume", "{}", "volume"),
        ("stop", '{"clear_queue": "yes"}', "clear_queue"),
        ("launch", "{}", "unknown command 'launch'"),
    ],
)
def test_rejections(name: str, payload: str, reason: str) -> None:
    with pytest.raises(CommandRejected) as info:
        parse(name, payload)
    assert reason in info.value.reason
    assert info.value.command == name


def test_oversize_payload_rejected_before_parsing() -> None:
    with pytest.raises(CommandRejected, match="payload too large: 5000 bytes, limit 4096"):
        parse("speak", b"{" + b" " * 4998 + b"}")


def test_non_utf8_rejected() -> None:
    with pytest.raises(CommandRejected, match="not UTF-8"):
        parse("speak", b'{"text": "\xff"}')


def test_rejection_keeps_a_valid_sender_id() -> None:
    with pytest.raises(CommandRejected) as info:
        parse("speak", '{"id": "abc", "text": ""}')
    assert info.value.request_id == "abc"
    with pytest.raises(CommandRejected) as info:
        parse("speak", '{"id": "bad id!", "text": ""}')
    assert info.value.request_id is None


def test_event_payload() -> None:
    event = CommandEvent(id="r", event="finished", device="d", command="speak",
                         audio_s=1.5, synthesis_ms=120.0, ts=1.0)
    assert json.loads(to_payload(event)) == {
        "id": "r", "event": "finished", "device": "d", "command": "speak", "ts": 1.0,
        "audio_s": 1.5, "synthesis_ms": 120.0, "final": True,
    }
    assert json.loads(to_payload(CommandEvent(id="r", event="accepted", device="d")))[
        "final"] is False


# -- hostile payloads (issue #14): bounded parsing, the id recovered whenever it can be read ----

def _rejection(name: str, payload: bytes, limit: int = 65_536) -> CommandRejected:
    with pytest.raises(CommandRejected) as info:
        parse(name, payload, limit=limit)
    return info.value


def _deep(levels: int) -> bytes:
    return b'{"id": "deep-1", "text": "x", "x": ' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize("levels", [2_000, 30_000])
def test_deep_nesting_is_rejected_under_its_id(levels: int) -> None:
    rejected = _rejection("speak", _deep(levels))
    assert "nested too deeply" in rejected.reason
    assert rejected.request_id == "deep-1"


@pytest.mark.parametrize("payload", [b"[" * 100_000, b"{" * 100_000,
                                     b'{"text": "x", "a": ' + b"[" * 201 + b"]" * 201 + b"}"])
def test_deep_json_is_refused_before_any_parser_sees_it(payload: bytes) -> None:
    """agent.jsonbound measures the nesting first: every command topic and Hermes say gives
    the same clear reason (and a Hermes error for our site)."""
    rejected = _rejection("speak", payload, limit=200_000)
    assert rejected.reason.startswith("malformed JSON: nested too deeply: more than 200")
    with pytest.raises(HermesRejected, match="nested too deeply: more than 200"):
        parse_say(b'{"siteId": "s1", "id": "h-1", "x": ' + payload + b"}", site_id="s1",
                  max_payload_bytes=300_000, max_text_chars=100)


@pytest.mark.parametrize(
    ("payload", "request_id"),
    [
        (b'{"id": "big-1", "text": "a", "volume": ' + b"9" * 5_000 + b"}", "big-1"),
        (b'{"volume": -' + b"1" * 5_000 + b', "id": "big-2", "text": "a"}', "big-2"),
        (b'{"id": "u-1", "text": "caf\xe9"}', "u-1"),
        (b'{"text": "\xff\xfe\xfd", "id": "u-2"}', "u-2"),
        (b'{"id": "cut-1", "text": "no end', "cut-1"),
        (b'{"x": ' + b"{" * 3_000 + b"}" * 3_000 + b', "id": "after-deep"}', "after-deep"),
        (b' \n {"id" :\t"spaced", "text": 5}', "spaced"),
        (b'{"id": "first", "text": 5, "id": "last"}', "last"),
        (b'{"note": "a \\"quoted\\" {[", "id": "esc-1", "text": 5}', "esc-1"),
    ],
    ids=["huge-int", "huge-int-first", "latin1", "bad-utf8-first", "cut-off", "after-deep",
         "whitespace", "repeated-key", "escapes-and-brackets-in-strings"],
)
def test_id_is_salvaged_from_payloads_that_do_not_parse(payload: bytes, request_id: str) -> None:
    assert salvage_id(payload) == request_id
    assert _rejection("speak", payload).request_id == request_id


@pytest.mark.parametrize(
    "payload",
    [
        b'{"x": {"id": "inner"}}',
        b'[{"id": "inner"}]',
        b'"id": "inner"',
        b'{"note": "\\"id\\": \\"inner\\"", "text": 5}',
        b'{"id": "\\ud800"}',
        b'{"id": "a\xffb"}',
        b'{"id": "has space"}',
        b'{"id": 5}',
        b'{"id": "' + b"a" * 129 + b'"}',
        b'{"id": "\\u0000"}',
        b'{"id": "ok\\n"}',
        b"",
        b"\x00\x01\x02",
    ],
    ids=["nested", "array", "no-object", "in-a-string", "lone-surrogate", "bad-utf8-in-id",
         "bad-syntax", "number", "too-long", "nul", "newline", "empty", "binary"],
)
def test_unreadable_ids_are_not_salvaged(payload: bytes) -> None:
    assert salvage_id(payload) is None


def test_oversize_payload_keeps_an_id_in_its_first_bytes() -> None:
    payload = json.dumps({"id": "big-3", "text": "x" * 10_000}).encode()
    rejected = _rejection("speak", payload, limit=4096)
    assert "payload too large" in rejected.reason and rejected.request_id == "big-3"
    late = json.dumps({"text": "x" * 10_000, "id": "late"}).encode()
    assert _rejection("speak", late, limit=4096).request_id is None  # past the bytes looked at


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"a": ' + b'"\\"' * 30_000, None),  # unterminated strings of escaped quotes
        (b"{" + b'"a\\"' * 30_000, None),
        (b"{" + b'"id":' * 20_000, "id"),  # each "id" is the value of the one before
        (b"{" + b'"", ' * 30_000, None),
        (b"{" + b"[" * 60_000, None),
        (b'{"id": "' + b"\\\\" * 30_000 + b'"}', None),  # longer than an id may be
    ],
    ids=["escaped-quotes", "keys-escaped", "repeated-keys", "empty-strings", "open-brackets",
         "long-escapes"],
)
def test_salvage_is_one_pass_over_a_bounded_prefix(payload: bytes, expected: str | None) -> None:
    """Hostile shapes that would make a naive scanner quadratic or recursive end at once
    (the test run's timeout is the bound; nothing is timed here)."""
    assert salvage_id(payload, max_bytes=len(payload)) == expected


def test_top_level_strings_reports_whether_the_object_ended() -> None:
    found = top_level_strings(b'{"siteId": "kitchen", "id": "s-1"} trailing', ("siteId", "id"),
                              max_bytes=1000)
    assert found is not None and found.closed
    assert found.strings == {"siteId": "kitchen", "id": "s-1"}
    cut = top_level_strings(b'{"id": "s-1", "text": "' + b"x" * 100, ("siteId", "id"),
                            max_bytes=50)
    assert cut is not None and not cut.closed and cut.strings == {"id": "s-1"}
    assert top_level_strings(b"[1]", ("id",), max_bytes=10) is None


def _say(payload: bytes, limit: int = 65_536) -> object:
    return parse_say(payload, site_id="t1", max_payload_bytes=limit, max_text_chars=100)


@pytest.mark.parametrize(
    ("payload", "say_id", "request_id", "session_id"),
    [
        (b'{"id": "\\ud800", "siteId": "t1", "text": "Hello."}', "\ud800", None, None),
        (b'{"id": "h-2", "siteId": "t1", "sessionId": "\\udfff", "text": "Hi."}', "h-2", "h-2",
         "\udfff"),
        (b'{"id": "h-3", "siteId": "t1", "text": "caf\xe9"}', "h-3", "h-3", None),
        (b'{"id": "h 4", "siteId": "t1", "text": ""}', "h 4", None, None),
        (b'{"id": "h-5", "siteId": "t1", "text": "x", "x": ' + b"[" * 3_000 + b"]" * 3_000 + b"}",
         "h-5", "h-5", None),
    ],
    ids=["surrogate-id", "surrogate-session", "latin1-text", "id-with-space", "deep"],
)
def test_hermes_say_that_does_not_parse_is_answered_to_its_origin(
        payload: bytes, say_id: str, request_id: str | None, session_id: str | None) -> None:
    with pytest.raises(HermesRejected) as info:
        _say(payload)
    rejected = info.value
    assert rejected.origin == HermesOrigin(say_id, "t1", session_id)
    assert rejected.request_id == request_id  # ours: only an id with our syntax is kept
    error = json.loads(rejected.origin.error(rejected.reason).payload)
    assert error["context"] == say_id and error["sessionId"] == session_id
    assert json.loads(rejected.origin.finished().payload)["id"] == say_id
    assert rejected.origin.error("x").payload.isascii()  # unencodable strings travel escaped


def test_hermes_say_for_another_site_is_ignored_even_when_it_does_not_parse() -> None:
    assert _say(b'{"id": "o-1", "siteId": "bedroom", "text": "caf\xe9"}') is None
    assert _say(b'{"id": "o-2", "siteId": "\\ud800", "text": "x"}') is None
    big = json.dumps({"siteId": "bedroom", "text": "x" * 5_000}).encode()
    assert _say(big, limit=1024) is None


def test_oversize_hermes_say_is_answered_when_its_site_is_read() -> None:
    big = json.dumps({"id": "o-3", "siteId": "t1", "text": "x" * 5_000}).encode()
    with pytest.raises(HermesRejected) as info:
        _say(big, limit=1024)
    assert info.value.origin == HermesOrigin("o-3", "t1", None)
    assert "payload too large" in info.value.reason
    late_site = json.dumps({"id": "o-4", "text": "x" * 5_000, "siteId": "t1"}).encode()
    with pytest.raises(HermesRejected) as info:
        _say(late_site, limit=1024)
    assert info.value.origin is None and info.value.request_id == "o-4"  # site unknown


def test_describe_json_error() -> None:
    assert describe_json_error("recursion limit exceeded at line 1 column 9").startswith(
        "malformed JSON: nested too deeply")
    assert describe_json_error("EOF while parsing") == "malformed JSON: EOF while parsing"
