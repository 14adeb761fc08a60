"""Hostile payloads and topics, sent through a real Mosquitto to a running agent, each get an
answer: deep nesting, unencodable Hermes strings, over-long command topics, and payloads that
fail to parse but whose ``id`` can still be read (issue #14, items 1, 2, 3 and 9)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agent.mqtt.topics import (
    HERMES_ERROR,
    HERMES_SAY,
    HERMES_SAY_FINISHED,
    MAX_TOPIC_BYTES,
    Namespace,
)
from tests.support.broker import Broker, Recorder
from tests.support.controller import agent_fixture, controller_fixture
from tests.support.raw_mqtt import RawPublisher

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
DEV = NS.device("t1")
GROUP = "lobby"
LONG_NAME = "x" * 600


agent = agent_fixture(mqtt={"groups": [GROUP]})
controller = controller_fixture([DEV.events.as_filter(), DEV.status.as_filter(),
                                 HERMES_ERROR.as_filter(), HERMES_SAY_FINISHED.as_filter()])


@pytest.fixture()
def raw(mqtt_broker: Broker, controller: Recorder) -> Iterator[RawPublisher]:
    with RawPublisher(mqtt_broker) as publisher:
        yield publisher


@pytest.fixture(autouse=True)
def no_traceback(capfd: pytest.CaptureFixture[str]) -> Iterator[None]:
    """The in-process agent logs no traceback and no failed handler for any of these."""
    yield
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    assert "handler_failed" not in out + err


def finals(recorder: Recorder) -> list[dict[str, Any]]:
    return [e for e in recorder.json_on(DEV.events) if e.get("final")]


def final_for(recorder: Recorder, request_id: str) -> dict[str, Any]:
    return recorder.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"])


def still_serving(recorder: Recorder, raw: RawPublisher) -> None:
    """A ping sent after the hostile message is answered, and nothing arrived twice."""
    raw.publish(DEV.command("ping").value, b'{"id": "after"}')
    assert final_for(recorder, "after")["event"] == "pong"
    ids = [e["id"] for e in finals(recorder)]
    assert len(ids) == len(set(ids)), ids


def nested(levels: int, head: str = '"id": "deep-1", "text": "x", ') -> bytes:
    return ("{" + head + '"x": ' + "[" * levels + "]" * levels + "}").encode()


@pytest.mark.parametrize("levels", [2_000, 30_000])
def test_deeply_nested_json_is_rejected_under_its_id(controller: Recorder, raw: RawPublisher,
                                                     levels: int) -> None:
    raw.publish(DEV.command("speak").value, nested(levels))
    final = final_for(controller, "deep-1")
    assert final["event"] == "rejected" and "nested too deeply" in final["reason"], final
    still_serving(controller, raw)


def test_deep_nesting_before_the_id_still_gives_the_id(controller: Recorder,
                                                       raw: RawPublisher) -> None:
    payload = b'{"x": ' + b"[" * 5_000 + b"]" * 5_000 + b', "id": "deep-2", "text": "x"}'
    raw.publish(DEV.command("speak").value, payload)
    assert final_for(controller, "deep-2")["event"] == "rejected"
    still_serving(controller, raw)


def test_deeply_nested_hermes_say_gets_a_hermes_error(controller: Recorder,
                                                      raw: RawPublisher) -> None:
    raw.publish(HERMES_SAY.value,
                nested(3_000, '"id": "hd-1", "siteId": "t1", "sessionId": "s-1", "text": "x", '))
    error = controller.wait_json(HERMES_ERROR, lambda p: True)
    assert error["context"] == "hd-1" and error["siteId"] == "t1"
    assert "nested too deeply" in error["error"]
    controller.wait_json(HERMES_SAY_FINISHED, lambda p: p["id"] == "hd-1")
    assert final_for(controller, "hd-1")["event"] == "rejected"
    still_serving(controller, raw)


@pytest.mark.parametrize(
    ("payload", "say_id", "session_id"),
    [
        (b'{"id": "\\ud800", "siteId": "t1", "text": "Hello."}', "\ud800", None),
        (b'{"id": "hs-2", "siteId": "t1", "sessionId": "\\udfff", "text": "Hi."}', "hs-2",
         "\udfff"),
        (b'{"id": "hs-3", "siteId": "t1", "text": "\\ud800 Hello."}', "hs-3", None),
        (b'{"id": "hs-4", "siteId": "t1", "text": "caf\xe9"}', "hs-4", None),
    ],
    ids=["surrogate-id", "surrogate-session", "surrogate-text", "latin1-text"],
)
def test_hermes_say_with_unencodable_strings_is_answered(
        controller: Recorder, raw: RawPublisher, payload: bytes, say_id: str,
        session_id: str | None) -> None:
    raw.publish(HERMES_SAY.value, payload)
    error = controller.wait_json(HERMES_ERROR, lambda p: True)
    assert error["context"] == say_id and error["siteId"] == "t1"
    assert error["sessionId"] == session_id and error["error"]
    done = controller.wait_json(HERMES_SAY_FINISHED, lambda p: True)
    assert done == {"id": say_id, "siteId": "t1", "sessionId": session_id}
    final = controller.wait_json(DEV.events, lambda e: e["final"])
    assert final["event"] == "rejected" and final["command"] == "hermes/tts/say"
    if say_id.isascii():
        assert final["id"] == say_id
    else:  # not a valid request id: answered on the events topic under a generated one
        assert len(final["id"]) >= 16 and final["id"].isalnum()
    still_serving(controller, raw)


def test_hermes_say_with_a_valid_surrogate_pair_is_spoken(controller: Recorder,
                                                          raw: RawPublisher) -> None:
    raw.publish(HERMES_SAY.value,
                b'{"id": "emoji-1", "siteId": "t1", "text": "Hello \\ud83d\\ude00."}')
    done = controller.wait_json(HERMES_SAY_FINISHED, lambda p: True)
    assert done["id"] == "emoji-1"
    assert final_for(controller, "emoji-1")["event"] == "finished"
    assert controller.json_on(HERMES_ERROR) == []


@pytest.mark.parametrize(
    "topic",
    [
        f"tts/t1/cmd/{LONG_NAME}",
        f"tts/group/{GROUP}/cmd/{LONG_NAME}",
        f"tts/all/cmd/{LONG_NAME}",
    ],
    ids=["device", "group", "fleet"],
)
def test_over_long_command_topic_is_rejected_under_its_id(controller: Recorder,
                                                          raw: RawPublisher, topic: str) -> None:
    assert len(topic) > MAX_TOPIC_BYTES
    raw.publish(topic, b'{"id": "longtopic-1"}')
    final = final_for(controller, "longtopic-1")
    assert final["event"] == "rejected", final
    assert f"longer than {MAX_TOPIC_BYTES} bytes" in final["reason"]
    assert final["command"].startswith("xxx") and len(final["command"]) <= 67
    still_serving(controller, raw)


def test_over_long_topic_without_an_id_is_answered_under_a_generated_one(
        controller: Recorder, raw: RawPublisher) -> None:
    raw.publish(f"tts/t1/cmd/{LONG_NAME}", b"\xff\xfe not json")
    final = controller.wait_json(DEV.events, lambda e: e["final"])
    assert final["event"] == "rejected" and len(final["id"]) >= 16
    still_serving(controller, raw)


def _huge_int(request_id: str) -> bytes:
    return b'{"id": "' + request_id.encode() + b'", "text": "hi", "volume": ' + b"9" * 5_000 + b"}"


@pytest.mark.parametrize(
    ("payload", "request_id", "reason"),
    [
        (_huge_int("bigint-1"), "bigint-1", "number"),
        (b'{"text": "hi", "volume": ' + b"1" * 5_000 + b', "id": "bigint-2"}', "bigint-2",
         "number"),
        (b'{"id": "utf8-1", "text": "caf\xe9"}', "utf8-1", "not UTF-8"),
        (b'{"text": "\xff\xfe", "id": "utf8-2"}', "utf8-2", "not UTF-8"),
        (b'{"id": "trunc-1", "text": "unterminated', "trunc-1", "malformed JSON"),
        (json.dumps({"id": "big-2", "text": "x" * 70_000}).encode(), "big-2",
         "payload too large"),
    ],
    ids=["huge-int", "huge-int-before-id", "latin1", "bad-utf8-before-id", "truncated",
         "oversize"],
)
def test_the_id_is_recovered_when_it_can_be_read(controller: Recorder, raw: RawPublisher,
                                                 payload: bytes, request_id: str,
                                                 reason: str) -> None:
    raw.publish(DEV.command("speak").value, payload)
    final = final_for(controller, request_id)
    assert final["event"] == "rejected" and reason in final["reason"], final
    still_serving(controller, raw)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"x": {"id": "inner"}, "text": 5}',  # not the top level
        b'["id", "inner"]',  # not an object
        b'{"id": "has space", "text": 5}',  # not a valid id
        b'{"id": 5, "text": "hi"}',  # not a string
        b'{"text": "hi", "volume": 2, "note": "\\"id\\": \\"inner\\""}',  # inside a string
    ],
    ids=["nested", "array", "bad-id", "number-id", "quoted"],
)
def test_an_unreadable_id_is_replaced_by_a_generated_one(
        controller: Recorder, raw: RawPublisher, payload: bytes) -> None:
    raw.publish(DEV.command("speak").value, payload)
    final = controller.wait_json(DEV.events, lambda e: e["final"])
    assert final["event"] == "rejected" and final["id"] != "inner"
    assert len(final["id"]) >= 16 and final["id"].isalnum()
    still_serving(controller, raw)
