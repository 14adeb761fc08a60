"""The one outcome vocabulary (agent/outcomes.py): its words are the wire's, every part uses
it, nothing outside it is published as a final event, and model events keep today's JSON."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from agent.audio.events import PlayerEvents
from agent.audio.item import PlaybackEvent, PlayItem
from agent.audio.stats import PlayerBook
from agent.commands.send_wait import succeeded
from agent.health.snapshot import OUTCOMES, RequestStats
from agent.library.events import ReloadResult, damage_event, model_event
from agent.mqtt.protocol import FINAL_EVENTS, CommandEvent, ModelEvent, to_payload
from agent.mqtt.publisher import EventPublisher, model_event_fields
from agent.mqtt.topics import Namespace
from agent.mqtt.tracker import RequestTracker
from agent.outcomes import (
    DUPLICATE_OF,
    FREE_ID,
    HERMES_NORMAL,
    PLAYER_EVENTS,
    SPEAK_OUTCOMES,
    SUCCESS,
    WORKER_OUTCOMES,
    WYOMING_OUTCOMES,
    Outcome,
    Progress,
    VoiceEvent,
    VoiceEventKind,
)
from agent.pipeline.worker import Reporter as PipelineReporter
from agent.settings import WyomingSettings
from agent.wyoming.server import WyomingServer
from tests.support.recorders import Sent

DEV = Namespace("tts").device("d1")

FINAL_WORDS = ["finished", "failed", "rejected", "expired", "interrupted", "done", "pong",
               "duplicate"]
"""The final events on the wire before the vocabulary was one enum (protocol.FINAL_EVENTS)."""
PROGRESS_WORDS = ["accepted", "started", "in_progress", "progress"]


def tracker() -> tuple[RequestTracker, Sent]:
    sent = Sent()
    return RequestTracker(EventPublisher(sent, DEV)), sent


def published(sent: Sent) -> list[dict[str, Any]]:
    return [json.loads(m.payload) for m in sent.messages]


# -- the words ---------------------------------------------------------------------------------


def test_the_enums_hold_exactly_the_wire_words() -> None:
    assert [o.value for o in Outcome] == FINAL_WORDS
    assert [p.value for p in Progress] == PROGRESS_WORDS
    assert set(FINAL_WORDS) == FINAL_EVENTS


@pytest.mark.parametrize("word", FINAL_WORDS + PROGRESS_WORDS)
def test_every_wire_word_round_trips(word: str) -> None:
    member = Outcome(word) if word in FINAL_WORDS else Progress(word)
    assert member == word and str(member) == word and f"{member}" == word
    assert json.dumps({member: member}) == json.dumps({word: word})
    event = CommandEvent(id="r1", event=word, device="d1", ts=1.0)  # type: ignore[arg-type]
    assert event.event is member
    wire = json.loads(to_payload(event))
    assert wire["event"] == word and wire["final"] is (word in FINAL_WORDS)
    wire.pop("final")  # computed
    assert CommandEvent.model_validate(wire).event is member


def test_the_subsets_are_the_lists_each_part_had() -> None:
    assert {"failed", "expired"} == WORKER_OUTCOMES
    assert set(PLAYER_EVENTS) == {"started", "finished", "interrupted", "failed", "expired"}
    assert list(SPEAK_OUTCOMES) == ["finished", "failed", "rejected", "expired", "interrupted"]
    assert OUTCOMES == SPEAK_OUTCOMES
    assert set(WYOMING_OUTCOMES) == {"finished", "failed", "rejected", "interrupted"}
    assert {"finished", "failed", "expired", "interrupted", "done", "pong"} == DUPLICATE_OF
    assert {"finished", "done", "pong"} == SUCCESS
    assert {"rejected", "expired"} == FREE_ID
    assert {"finished", "interrupted"} == HERMES_NORMAL


def test_send_exit_status_follows_the_outcome() -> None:
    assert [w for w in FINAL_WORDS if succeeded({"event": w})] == ["finished", "done", "pong"]
    assert succeeded({"event": "duplicate", "outcome": "finished"})
    assert not succeeded({"event": "duplicate", "outcome": "interrupted"})
    assert not succeeded({"event": "bogus"})


def test_wyoming_counts_use_the_enum_words() -> None:
    settings = WyomingSettings(uri="tcp://127.0.0.1:10200", zeroconf=False)  # never bound here
    server = WyomingServer(settings, catalog=None)  # type: ignore[arg-type]
    request = SimpleNamespace(audio_s=0.0, first_audio_s=None, synthesis_s=None)
    for outcome in WYOMING_OUTCOMES:
        server.record(outcome, request)  # type: ignore[arg-type]
    stats = server.stats()
    assert {w: stats[w] for w in ("finished", "failed", "rejected", "interrupted")} == {  # type: ignore[literal-required]
        "finished": 1, "failed": 1, "rejected": 1, "interrupted": 1}
    assert stats["requests"] == 4
    server.pool.shutdown(wait=False)


def test_health_counts_take_the_words_and_the_members() -> None:
    stats = RequestStats(10)
    stats.record("finished")  # type: ignore[arg-type]
    stats.record(Outcome.FAILED)
    section = stats.snapshot()
    assert section["total"] == {"finished": 1, "failed": 1, "rejected": 0, "expired": 0,
                                "interrupted": 0}
    assert section["window"] == {"requests": 2, "failed": 1, "finished": 1}
    assert json.loads(json.dumps(section["total"])) == {"finished": 1, "failed": 1,
                                                        "rejected": 0, "expired": 0,
                                                        "interrupted": 0}


# -- nothing outside the enum is published as a final event ------------------------------------


@pytest.mark.parametrize("word", ["bogus", "started", "accepted", "progress", "FINISHED", ""])
def test_finish_refuses_what_is_not_an_outcome(word: str) -> None:
    t, sent = tracker()
    assert t.open("r1", "speak")
    with pytest.raises(ValueError, match="is not a final event"):
        t.finish("r1", word)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not a final event"):
        t.answer("r2", "ping", word)  # type: ignore[arg-type]
    assert [e["event"] for e in published(sent)] == ["accepted"]
    assert t.is_open("r1")


@pytest.mark.parametrize("word", FINAL_WORDS)
def test_progress_refuses_a_final_event(word: str) -> None:
    t, sent = tracker()
    t.open("r1", "speak")
    with pytest.raises(ValueError, match="is a final event"):
        t.progress("r1", word)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        t.progress("r1", "bogus")  # type: ignore[arg-type]
    assert [e["event"] for e in published(sent)] == ["accepted"]


def test_the_schema_refuses_words_outside_the_enum() -> None:
    with pytest.raises(ValidationError):
        CommandEvent(id="r1", event="bogus", device="d1")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):  # a rejected request never uses up its id
        CommandEvent(id="r1", event="duplicate", device="d1", outcome="rejected")  # type: ignore[arg-type]


@pytest.mark.parametrize("word", FINAL_WORDS)
def test_a_plain_word_is_published_as_the_same_word(word: str) -> None:
    t, sent = tracker()
    t.answer("r1", "ping", word)  # type: ignore[arg-type]
    assert published(sent)[-1]["event"] == word and published(sent)[-1]["final"] is True


# -- the player reports through the worker's Reporter -----------------------------------------


def test_the_player_reports_to_the_tracker_exactly_once() -> None:
    t, sent = tracker()
    reporter: PipelineReporter = t  # the tracker is the pipeline's Reporter, for both parts
    events = PlayerEvents(reporter, PlayerBook("default"))
    t.open("r1", "speak")
    item = PlayItem("r1")
    events.deliver(PlaybackEvent(Progress.STARTED, "r1"))
    events.finish(item, Outcome.FINISHED, None, 1.23456)
    events.finish(item, Outcome.FAILED, "late")  # the item has its final event already
    assert not t.finish("r1", Outcome.INTERRUPTED, reason="stop")  # nor does the tracker
    wire = published(sent)
    assert [e["event"] for e in wire] == ["accepted", "started", "finished"]
    assert wire[-1]["audio_s"] == 1.235 and wire[-1]["final"] is True
    assert item.result == PlaybackEvent(Outcome.FINISHED, "r1", None, 1.235)


def test_a_worker_final_wins_over_the_players_later_one() -> None:
    t, sent = tracker()
    events = PlayerEvents(t, PlayerBook("default"))
    t.open("r1", "speak")
    assert t.finish("r1", Outcome.FAILED, reason="voice gone")  # the worker's answer
    events.finish(PlayItem("r1"), Outcome.INTERRUPTED, "player closed")  # ignored by the tracker
    events.settle_later(item := PlayItem("r1"), Outcome.INTERRUPTED, "flushed by stop")
    events.emit_pending()
    assert [e["event"] for e in published(sent)] == ["accepted", "failed"]
    assert item.result is not None and item.result.kind is Outcome.INTERRUPTED


def test_a_failing_reporter_never_stops_the_player() -> None:
    class Broken:
        def is_open(self, request_id: str) -> bool:
            return True

        def note(self, request_id: str, **fields: object) -> None:
            return None

        def progress(self, request_id: str, event: Progress, **fields: object) -> bool:
            raise RuntimeError("boom")

        def finish(self, request_id: str, event: Outcome, *, reason: str | None = None,
                   audio_s: float | None = None) -> bool:
            raise RuntimeError("boom")

    book = PlayerBook("default")
    events = PlayerEvents(Broken(), book)
    events.deliver(PlaybackEvent(Progress.STARTED, "r1"))
    events.finish(PlayItem("r1"), Outcome.EXPIRED, "deadline passed before playback")
    stats = book.snapshot(queue_depth=0, volume=1.0, alive=True)
    assert (stats["started"], stats["expired"]) == (1, 1)


# -- model events: a typed dataclass, today's JSON at the edge --------------------------------

_VOICE = SimpleNamespace(name="joe", version="2.0.0", variant="int8", load_s=0.12345,
                         provider="cpu", bundle=SimpleNamespace(
                             sha256={"model.onnx": "ab" * 32, "config.json": "cd" * 32}))
_OLD = SimpleNamespace(version="1.0.0")
_SHA = ('"sha256":{"model.onnx":"' + "ab" * 32 + '","config.json":"' + "cd" * 32 + '"}')

MODEL_EVENTS: list[tuple[str, Any, dict[str, Any], bytes]] = [
    ("loaded, replacing a signed one",
     lambda: model_event(ReloadResult("joe", "loaded", "2.0.0", signed_by="k1"), _VOICE, _OLD,
                         "int8 is stale"),
     {"event": "model_loaded", "voice": "joe", "version": "2.0.0", "variant": "int8",
      "sha256": {"model.onnx": "ab" * 32, "config.json": "cd" * 32}, "load_s": 0.123,
      "provider": "cpu", "previous_version": "1.0.0", "signed_by": "k1",
      "variant_reason": "int8 is stale"},
     ('{"id":"m1","event":"model_loaded","device":"d1","ts":1.5,"voice":"joe","version":"2.0.0",'
      '"variant":"int8","variant_reason":"int8 is stale","signed_by":"k1",' + _SHA +
      ',"load_s":0.123,"provider":"cpu","previous_version":"1.0.0","final":false}').encode()),
    ("loaded, first and unsigned",
     lambda: model_event(ReloadResult("joe", "loaded", "2.0.0"), _VOICE, None, None),
     {"event": "model_loaded", "voice": "joe", "version": "2.0.0", "variant": "int8",
      "sha256": {"model.onnx": "ab" * 32, "config.json": "cd" * 32}, "load_s": 0.123,
      "provider": "cpu", "previous_version": None, "signed_by": None},
     ('{"id":"m1","event":"model_loaded","device":"d1","ts":1.5,"voice":"joe","version":"2.0.0",'
      '"variant":"int8",' + _SHA + ',"load_s":0.123,"provider":"cpu","final":false}').encode()),
    ("rejected",
     lambda: model_event(ReloadResult("joe", "rejected", "3.0.0", reason="sha256 mismatch")),
     {"event": "model_rejected", "voice": "joe", "version": "3.0.0", "reason": "sha256 mismatch"},
     b'{"id":"m1","event":"model_rejected","device":"d1","ts":1.5,"voice":"joe",'
     b'"version":"3.0.0","reason":"sha256 mismatch","final":false}'),
    ("rejected, no version",
     lambda: model_event(ReloadResult("joe", "rejected", None, reason="no manifest")),
     {"event": "model_rejected", "voice": "joe", "version": None, "reason": "no manifest"},
     b'{"id":"m1","event":"model_rejected","device":"d1","ts":1.5,"voice":"joe",'
     b'"reason":"no manifest","final":false}'),
    ("damaged",
     lambda: damage_event(_VOICE, {"model.int8.onnx": "model.int8.onnx: size 3, manifest says 4",
                                   "a.onnx": "a.onnx: missing"}),
     {"event": "model_damaged", "voice": "joe", "version": "2.0.0", "variant": "int8",
      "files": ["a.onnx", "model.int8.onnx"],
      "reason": "a.onnx: missing; model.int8.onnx: size 3, manifest says 4"},
     b'{"id":"m1","event":"model_damaged","device":"d1","ts":1.5,"voice":"joe",'
     b'"version":"2.0.0","reason":"a.onnx: missing; model.int8.onnx: size 3, manifest says 4",'
     b'"variant":"int8","files":["a.onnx","model.int8.onnx"],"final":false}'),
]
"""Each model event as the library built it before it was typed (the dict its sink got) and
the JSON published for it then (id and ts fixed)."""


@pytest.mark.parametrize(("make", "fields", "payload"), [m[1:] for m in MODEL_EVENTS],
                         ids=[m[0] for m in MODEL_EVENTS])
def test_model_events_are_typed_and_serialise_to_todays_json(
        make: Any, fields: dict[str, Any], payload: bytes) -> None:
    event = make()
    assert isinstance(event, VoiceEvent) and isinstance(event.kind, VoiceEventKind)
    with pytest.raises(AttributeError):
        event.voice = "other"  # frozen
    assert event.kind.value == fields["event"]
    assert model_event_fields(event) == fields
    assert list(model_event_fields(event)) == list(fields)
    assert to_payload(ModelEvent(id="m1", device="d1", ts=1.5,
                                 **model_event_fields(event))) == payload


@pytest.mark.parametrize(("make", "payload"), [(m[1], m[3]) for m in MODEL_EVENTS],
                         ids=[m[0] for m in MODEL_EVENTS])
def test_the_publisher_sends_model_events_as_before(make: Any, payload: bytes) -> None:
    sent = Sent()
    EventPublisher(sent, DEV).model_event(make())
    (message,) = sent.messages
    assert message.topic == DEV.events and not message.retain
    got, want = json.loads(message.payload), json.loads(payload)
    assert got.pop("id") and got.pop("ts")
    want.pop("id"), want.pop("ts")
    assert got == want and list(got) == list(want)


def test_voice_event_kinds_are_the_wire_words() -> None:
    assert [k.value for k in VoiceEventKind] == ["model_loaded", "model_rejected",
                                                 "model_damaged"]
    assert set(get_args(ModelEvent.model_fields["event"].annotation)) == {
        k.value for k in VoiceEventKind}
