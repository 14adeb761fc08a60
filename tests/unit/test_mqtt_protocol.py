"""Command schemas: strict, bounded, with readable reasons; events serialise as documented."""

from __future__ import annotations

import json

import pytest

from agent.mqtt.protocol import (
    CommandEvent,
    CommandRejected,
    PingCommand,
    SpeakCommand,
    StopCommand,
    VolumeCommand,
    parse_command,
    to_payload,
)


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
