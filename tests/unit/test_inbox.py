"""The intake's two lanes (:class:`agent.mqtt.intake.Inbox`, #27 item 6): control commands are
served before queued speaks and are never refused for the speaks' lane being full; a ``stop``
still comes after every request queued before it, so it cuts them; the dispatcher over an
inbox answers every request exactly once."""

from __future__ import annotations

import json
import queue
import time

import pytest

from agent.mqtt.dispatch import Dispatcher
from agent.mqtt.intake import Inbox, Intake, Request
from agent.mqtt.protocol import (
    Command,
    PingCommand,
    ReloadCommand,
    SpeakCommand,
    StopCommand,
    VolumeCommand,
)
from agent.mqtt.publisher import EventPublisher
from agent.mqtt.topics import Namespace
from agent.mqtt.tracker import RequestTracker
from agent.pipeline.jobs import JobQueue
from tests.support import recorders
from tests.unit.test_mqtt_pipeline import Controls  # records what the dispatcher asks

DEV = Namespace("tts").device("d1")


def req(command: Command, name: str) -> Request:
    return Request(command, name, None, None, None, None, time.monotonic())


def speak(request_id: str) -> Request:
    return req(SpeakCommand(id=request_id, text="x"), "speak")


def ids(inbox: Inbox) -> list[str]:
    taken = []
    while True:
        try:
            taken.append(inbox.get_nowait().id)
        except queue.Empty:
            return taken


def test_control_commands_overtake_and_a_stop_waits_its_turn() -> None:
    inbox = Inbox(8)
    for item in (speak("a"), speak("b"), req(PingCommand(id="p1"), "ping"),
                 req(StopCommand(id="stop", clear_queue=True), "stop"), speak("c"),
                 req(VolumeCommand(id="v", volume=0.5), "volume"),
                 req(ReloadCommand(id="r"), "reload")):
        inbox.put_nowait(item)
    assert inbox.qsize() == 7
    # the ping and the volume overtake the speaks (and the waiting stop); the stop waits for
    # a and b (queued before it), not for c; reload keeps its place among the speaks
    assert ids(inbox) == ["p1", "v", "a", "b", "stop", "c", "r"]
    assert inbox.empty()
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.01)


def test_each_lane_is_bounded_on_its_own() -> None:
    inbox = Inbox(2, controls=1)
    inbox.put_nowait(speak("a"))
    inbox.put_nowait(speak("b"))
    with pytest.raises(queue.Full, match=r"^busy: intake queue full \(2\)$"):
        inbox.put_nowait(speak("c"))
    inbox.put_nowait(req(PingCommand(id="p1"), "ping"))  # the speaks' lane is full: still taken
    with pytest.raises(queue.Full, match=r"^busy: control queue full \(1\)$"):
        inbox.put_nowait(req(PingCommand(id="p2"), "ping"))
    assert ids(inbox) == ["p1", "a", "b"]


def test_intake_answers_busy_per_lane() -> None:
    sent = recorders.Sent()
    tracker = RequestTracker(EventPublisher(sent, DEV))
    inbox = Inbox(1, controls=1)
    intake = Intake(topics=DEV, groups=(), tracker=tracker, requests=inbox,
                    max_payload_bytes=1024, max_text_chars=50, hermes_site_id=None)
    for item in (speak("a"), speak("b"), req(PingCommand(id="p1"), "ping"),
                 req(PingCommand(id="p2"), "ping")):
        intake.submit(item)
    reasons = {e["id"]: e["reason"] for e in map(json.loads, (m.payload for m in sent.messages))}
    assert reasons == {"b": "busy: intake queue full (1)", "p2": "busy: control queue full (1)"}


def test_a_stop_after_queued_speaks_clears_them() -> None:
    """Speaks queued before a ``stop`` with ``clear_queue`` are dispatched first and cleared
    by it (``interrupted``); a ping sent after them is answered before any; each request has
    exactly one final event."""
    sent = recorders.Sent()
    tracker = RequestTracker(EventPublisher(sent, DEV))
    inbox, jobs = Inbox(8), JobQueue(8)
    dispatcher = Dispatcher(inbox, jobs, tracker, Controls(), voice_names=lambda: ["v1"],
                            default_voice="v1",
                            status=lambda: None,  # type: ignore[arg-type, return-value]
                            reload=lambda command: ["v1"])
    for item in (speak("a"), speak("b"), speak("c"),
                 req(StopCommand(id="stop", clear_queue=True), "stop"),
                 req(PingCommand(id="ping"), "ping")):
        inbox.put_nowait(item)
    while not inbox.empty():
        dispatcher.handle(inbox.get_nowait())
    finals = [(e["id"], e["event"]) for e in map(json.loads, (m.payload for m in sent.messages))
              if e["final"]]
    assert finals == [("ping", "pong"), ("a", "interrupted"), ("b", "interrupted"),
                      ("c", "interrupted"), ("stop", "done")], finals
    assert len(jobs) == 0 and tracker.pending() == 0
