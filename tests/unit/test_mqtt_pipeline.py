"""The command pipeline stage by stage: tracker, intake, job queue, synthesis worker.

Real tiny voice for synthesis; the MQTT client and the player are replaced by recorders here
(wiring only: the real ones are covered by test_mqtt_agent.py and the audio tests).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent.audio.item import PlayItem
from agent.audio.queue import PlayQueue
from agent.library.voices import VoiceLibrary
from agent.mqtt.client import InboundMessage
from agent.mqtt.dispatch import Dispatcher, speak_deadline, speak_request
from agent.mqtt.hermes import HermesOrigin
from agent.mqtt.intake import Intake, Request
from agent.mqtt.protocol import PingCommand, SpeakCommand, StopCommand, VolumeCommand
from agent.mqtt.publisher import EventPublisher, ReplyRoute
from agent.mqtt.repeats import IN_PROGRESS_REASON, EndedWith, RecentIds
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY, HERMES_SAY_FINISHED, Namespace, Topic
from agent.mqtt.tracker import RequestTracker
from agent.pipeline.jobs import JobQueue, JobsFull, SpeakJob, SpeakRequest
from agent.pipeline.worker import SynthesisWorker
from agent.settings import Settings
from agent.voice.voice import SynthesisParams
from tests.support import recorders

DEV = Namespace("tts").device("d1")


class Sent(recorders.Sent):
    def events(self) -> list[dict[str, object]]:
        return [json.loads(m.payload) for m in self.messages if m.topic == DEV.events]


@pytest.fixture()
def sent() -> Sent:
    return Sent()


@pytest.fixture()
def tracker(sent: Sent) -> RequestTracker:
    return RequestTracker(EventPublisher(sent, DEV))


def test_exactly_one_final_event(tracker: RequestTracker, sent: Sent) -> None:
    reply = ReplyRoute(Topic("ctl/r"), b"c")
    assert tracker.open("a", "speak", reply=reply, voice="v", priority="high")
    assert not tracker.open("a", "speak")
    assert tracker.progress("a", "started")
    tracker.note("a", synthesis_ms=12.5)
    assert tracker.finish("a", "finished", audio_s=1.0)
    assert not tracker.finish("a", "interrupted", reason="late")
    assert not tracker.progress("a", "started")
    events = sent.events()
    assert [e["event"] for e in events] == ["accepted", "started", "finished"]
    assert events[-1]["voice"] == "v" and events[-1]["synthesis_ms"] == 12.5
    replies = [m for m in sent.messages if m.topic == reply.topic]
    assert len(replies) == 1 and replies[0].correlation_data == b"c"
    assert json.loads(replies[0].payload)["event"] == "finished"
    assert tracker.pending() == 0 and tracker.wait_idle(0)
    with pytest.raises(ValueError):
        tracker.finish("a", "started")


def test_concurrent_finishers_produce_one_final(tracker: RequestTracker, sent: Sent) -> None:
    for n in range(50):
        tracker.open(f"r{n}", "speak")
    barrier = threading.Barrier(4)

    def finisher(kind: str) -> None:
        barrier.wait()
        for n in range(50):
            tracker.finish(f"r{n}", kind)  # type: ignore[arg-type]

    threads = [threading.Thread(target=finisher, args=(k,))
               for k in ("finished", "interrupted", "failed", "expired")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finals = [e for e in sent.events() if e["final"]]
    assert sorted(e["id"] for e in finals) == sorted(f"r{n}" for n in range(50))


def test_hermes_answers_on_final(tracker: RequestTracker, sent: Sent) -> None:
    origin = HermesOrigin("h1", "kitchen", "s1")
    tracker.open("h1", "speak", hermes=origin)
    tracker.finish("h1", "failed", reason="device gone")
    hermes = [(m.topic.value, json.loads(m.payload)) for m in sent.messages
              if m.topic.value.startswith("hermes/")]
    assert hermes == [
        ("hermes/error/tts", {"error": "device gone", "context": "h1", "siteId": "kitchen",
                              "sessionId": "s1"}),
        ("hermes/tts/sayFinished", {"id": "h1", "siteId": "kitchen", "sessionId": "s1"}),
    ]


def inbound(topic: Topic, payload: bytes | dict[str, object], **kw: object) -> InboundMessage:
    data = json.dumps(payload).encode() if isinstance(payload, dict) else payload
    values: dict[str, object] = {"retain": False, "duplicate": False, "response_topic": None,
                                 "correlation_data": None, "expiry_s": None,
                                 "received": time.monotonic()}
    values.update(kw)
    return InboundMessage(topic, data, **values)  # type: ignore[arg-type]


def make_intake(tracker: RequestTracker, size: int = 8) -> tuple[Intake, queue.Queue[Request]]:
    requests: queue.Queue[Request] = queue.Queue(maxsize=size)
    intake = Intake(topics=DEV, groups=("g",), tracker=tracker, requests=requests,
                    max_payload_bytes=1024, max_text_chars=50, hermes_site_id="d1")
    return intake, requests


def test_intake_routes_dedupes_and_rejects(tracker: RequestTracker, sent: Sent) -> None:
    intake, requests = make_intake(tracker)
    intake.on_message(inbound(DEV.command("speak"), {"id": "a", "text": "hi"}, expiry_s=10,
                              response_topic="ctl/r", correlation_data=b"x"))
    intake.on_message(inbound(DEV.command("speak"), {"id": "a", "text": "hi"}, duplicate=True))
    intake.on_message(inbound(Namespace("tts").group_command("g", "ping"), b""))
    intake.on_message(inbound(Topic("tts/other/cmd/ping"), b""))  # not ours: ignored
    intake.on_message(inbound(DEV.command("speak"), {"id": "b", "text": "x" * 51}))
    intake.on_message(inbound(HERMES_SAY, {"text": "hermes", "siteId": "d1", "id": "h"}))
    first = requests.get_nowait()
    assert first.id == "a" and first.reply == ReplyRoute(Topic("ctl/r"), b"x")
    assert first.deadline is not None and first.deadline > first.received
    second = requests.get_nowait()
    assert second.name == "ping" and second.route is not None and second.route.group == "g"
    third = requests.get_nowait()
    assert third.hermes == HermesOrigin("h", "d1", None) and third.name == "speak"
    assert requests.empty() and intake.duplicates == 1
    # the repeat of "a" (still queued) is answered, not silently dropped (issue #14, item 6)
    in_progress, rejected = sent.events()
    assert (in_progress["id"], in_progress["event"], in_progress["final"]) == (
        "a", "in_progress", False)
    assert rejected["id"] == "b" and "longer than 50" in str(rejected["reason"])


def test_intake_full_and_closed(tracker: RequestTracker, sent: Sent) -> None:
    intake, requests = make_intake(tracker, size=1)
    for n in range(3):
        intake.on_message(inbound(DEV.command("ping"), {"id": f"p{n}"}))
    intake.close()
    intake.on_message(inbound(DEV.command("ping"), {"id": "late"}))
    assert requests.qsize() == 1
    reasons = {e["id"]: e["reason"] for e in sent.events()}
    assert reasons == {"p1": "busy: intake queue full (1)", "p2": "busy: intake queue full (1)",
                       "late": "agent is shutting down"}


def test_recent_ids_are_bounded_in_number_and_time() -> None:
    recent = RecentIds(capacity=3, ttl_s=60)
    assert not any(recent.seen(("c", str(n)), now=0.0) for n in range(5))
    assert recent.seen(("c", "4"), now=1.0) and not recent.seen(("c", "0"), now=1.0)
    assert recent.seen(("c", "0"), now=60.0)
    assert not recent.seen(("c", "0"), now=62.0)  # forgotten after the window


def test_a_repeated_id_is_answered_by_what_became_of_the_original(
        tracker: RequestTracker, sent: Sent) -> None:
    first, second, third = (ReplyRoute(Topic(f"ctl/{n}"), n.encode()) for n in ("1", "2", "3"))
    assert tracker.admit("a", "speak", reply=first)
    assert not tracker.admit("a", "speak", reply=second)  # waiting in the intake queue
    assert tracker.admit("a", "ping")  # another command with the same id is not a repeat
    assert tracker.open("a", "speak", reply=first, voice="v")
    assert not tracker.admit("a", "speak", reply=third)  # open
    assert tracker.finish("a", "failed", reason="device gone")
    assert not tracker.admit("a", "speak", reply=first)  # ended: a final duplicate
    events = [e for e in sent.events() if e["command"] == "speak"]
    assert [(e["event"], e["final"]) for e in events] == [
        ("in_progress", False), ("accepted", False), ("in_progress", False), ("failed", True),
        ("duplicate", True)]
    assert events[0]["reason"] == events[2]["reason"] == IN_PROGRESS_REASON
    assert (events[-1]["outcome"], events[-1]["reason"]) == ("failed", "device gone")
    replies = [(m.correlation_data, json.loads(m.payload)["event"]) for m in sent.messages
               if m.topic.value.startswith("ctl/")]
    assert replies == [(b"1", "failed"), (b"2", "failed"), (b"3", "failed"),
                       (b"1", "duplicate")]


def test_only_an_accepted_command_uses_up_its_id(tracker: RequestTracker, sent: Sent) -> None:
    intake, requests = make_intake(tracker)
    intake.on_message(inbound(DEV.command("speak"), {"id": "fix-1", "text": "hi", "x": 1}))
    intake.on_message(inbound(DEV.command("speak"), {"id": "fix-1", "text": "hi"}))
    retry = requests.get_nowait()
    tracker.answer(retry.id, retry.name, "rejected", reason="busy: full")  # the dispatcher's
    assert tracker.admit("fix-1", "speak")  # free again
    tracker.answer("fix-1", "speak", "expired", reason="expired before it was accepted")
    assert tracker.admit("fix-1", "speak")
    tracker.answer("fix-1", "speak", "done")
    assert not tracker.admit("fix-1", "speak")
    assert [e["event"] for e in sent.events()] == [
        "rejected", "rejected", "expired", "done", "duplicate"]
    assert intake.duplicates == 0


def test_a_repeated_hermes_say_gets_its_hermes_answers(tracker: RequestTracker,
                                                       sent: Sent) -> None:
    origin = HermesOrigin("h1", "kitchen", None)
    assert tracker.admit("h1", "speak", hermes=origin)
    tracker.open("h1", "speak", hermes=origin)
    tracker.finish("h1", "finished")
    assert not tracker.admit("h1", "speak", hermes=origin)
    hermes = [m.topic.value for m in sent.messages if m.topic.value.startswith("hermes/")]
    assert hermes == ["hermes/tts/sayFinished", "hermes/tts/sayFinished"]


def test_retained_commands_are_refused_and_deletions_ignored(tracker: RequestTracker,
                                                             sent: Sent) -> None:
    intake, requests = make_intake(tracker)
    intake.on_message(inbound(DEV.command("speak"), {"id": "r1", "text": "hi"}, retain=True))
    intake.on_message(inbound(DEV.command("speak"), b"", retain=True))  # clears a retained one
    intake.on_message(inbound(HERMES_SAY, {"text": "hi", "siteId": "d1", "id": "h"},
                              retain=True))
    assert requests.empty()
    assert [(e["id"], e["event"]) for e in sent.events()] == [("r1", "rejected"),
                                                               ("h", "rejected")]
    assert all("retained" in str(e["reason"]) for e in sent.events())
    assert [m.topic for m in sent.messages if m.topic.value.startswith("hermes/")] == [
        HERMES_ERROR, HERMES_SAY_FINISHED]
    intake.on_message(inbound(DEV.command("speak"), {"id": "r1", "text": "hi"}))
    assert requests.get_nowait().id == "r1"  # the refusal did not use up the id


def test_outcomes_are_remembered_in_a_bounded_window() -> None:
    recent = RecentIds(capacity=2, ttl_s=10)
    recent.remember(("c", "a"), EndedWith("finished"), now=0.0)
    recent.remember(("c", "b"), EndedWith("failed", "x"), now=1.0)
    assert recent.recall(("c", "a"), now=5.0) == (True, EndedWith("finished"))
    recent.remember(("c", "c"), EndedWith("done"), now=2.0)
    assert recent.recall(("c", "a"), now=5.0) == (False, None) and len(recent) == 2
    assert recent.recall(("c", "b"), now=11.0) == (True, EndedWith("failed", "x"))
    assert recent.recall(("c", "b"), now=11.5) == (False, None)


def job(request_id: str, priority: str = "normal", text: str = "Hello.") -> SpeakJob:
    command = SpeakCommand(id=request_id, text=text, priority=priority)  # type: ignore[arg-type]
    return SpeakJob(request_id, speak_request(command), None)


def test_speak_command_becomes_the_pipelines_request() -> None:
    command = SpeakCommand(id="a", text="Hi.", voice="v1", priority="urgent", volume=0.5,
                           speed=2.0)
    request = speak_request(command)
    assert (request.text, request.voice, request.priority, request.volume, request.speed) == (
        "Hi.", "v1", 100, 0.5, 2.0)
    assert request.synthesis_params(1.2).length_scale == pytest.approx(0.6)
    plain = speak_request(SpeakCommand(id="b", text="Hi."))
    assert plain.priority == 0 and plain.synthesis_params(1.2) == SynthesisParams()
    with pytest.raises(ValueError, match="volume"):
        SpeakRequest("Hi.", volume=1.5)


def test_job_queue_order_and_bound() -> None:
    jobs = JobQueue(4)
    assert jobs.put(job("n1")) == 0
    assert jobs.put(job("l1", "low")) == 1
    assert jobs.put(job("u1", "urgent")) == 0
    assert jobs.put(job("n2")) == 2
    with pytest.raises(JobsFull, match=r"^busy: 4 speak requests already queued$"):
        jobs.put(job("x"))
    assert jobs.pop_above(0) is not None  # urgent is above normal
    assert jobs.pop_above(0) is None  # nothing above normal left
    assert [j.request_id for j in jobs.take_all()] == ["n1", "n2", "l1"]


class HoldingPlayer:
    """Accepts items and never plays them (the worker must not depend on playback to progress)."""

    def __init__(self) -> None:
        self.items: list[PlayItem] = []
        self.submitted = threading.Condition()

    def submit(self, item: PlayItem) -> None:
        item._bind(lambda: None)
        with self.submitted:
            self.items.append(item)
            self.submitted.notify_all()

    def has_room(self, priority: int, timeout: float = 0.0) -> bool:
        return True


def test_urgent_job_overtakes_a_long_one_mid_synthesis(tiny_voice_dir: Path,
                                                       tracker: RequestTracker) -> None:
    settings = Settings(device_id="d1", models={"dir": tiny_voice_dir.parent,
                                                "default_voice": "tiny-test", "watch": False})
    jobs = JobQueue(8)
    player = HoldingPlayer()
    worker = SynthesisWorker(jobs, VoiceLibrary(settings), player, tracker, item_buffer_s=1.0)
    long_text = " ".join(f"This is sentence number {n} of a long announcement." for n in range(40))
    for request_id in ("long", "urgent"):
        tracker.open(request_id, "speak")
    worker.start()
    try:
        jobs.put(job("long", "low", long_text))
        with player.submitted:
            assert player.submitted.wait_for(lambda: len(player.items) == 1, 30)
        long_item = player.items[0]
        jobs.put(job("urgent", "urgent", "Fire!"))
        with player.submitted:
            assert player.submitted.wait_for(lambda: len(player.items) == 2, 30)
        urgent_item = player.items[1]
        deadline = time.monotonic() + 30
        while not urgent_item._source_state()[0] and time.monotonic() < deadline:
            threading.Event().wait(0.02)
        closed_urgent = urgent_item._source_state()[0]
        closed_long = long_item._source_state()[0]
    finally:
        worker.stop(5)
    assert closed_urgent, "the urgent job was not synthesized while the long one was pending"
    assert not closed_long, "the long job finished first: no preemption happened"
    assert [i.request_id for i in player.items] == ["long", "urgent"]
    assert urgent_item.priority > long_item.priority


def test_what_ssml_asked_and_was_ignored_is_in_started_and_logged(
        tiny_voice_dir: Path, tracker: RequestTracker, sent: Sent) -> None:
    settings = Settings(device_id="d1", models={"dir": tiny_voice_dir.parent,
                                                "default_voice": "tiny-test", "watch": False})
    jobs, player = JobQueue(8), HoldingPlayer()
    worker = SynthesisWorker(jobs, VoiceLibrary(settings), player, tracker, item_buffer_s=1.0)
    tracker.open("ssml", "speak")
    tracker.open("plain", "speak")
    with capture_logs() as logs:
        worker.start()
        try:
            jobs.put(job("ssml", text='<speak><prosody pitch="+10%">Gate two.</prosody>'
                                      '<mark name="m"/></speak>'))
            jobs.put(job("plain", text="Gate two."))
            with player.submitted:
                assert player.submitted.wait_for(lambda: len(player.items) == 2, 30)
        finally:
            worker.stop(5)
    for request_id in ("ssml", "plain"):
        assert tracker.progress(request_id, "started")
    started = {e["id"]: e for e in sent.events() if e["event"] == "started"}
    assert started["ssml"]["warnings"] == ["ignored <prosody pitch>", "ignored <mark>"]
    assert "warnings" not in started["plain"]
    assert started["ssml"]["voice"] == "tiny-test"
    logged = [e for e in logs if e["event"] == "ssml_ignored"]
    assert [(e["log_level"], e["ignored"]) for e in logged] == [
        ("warning", ["ignored <prosody pitch>", "ignored <mark>"])]


class BehindPlayer:
    """A player that is behind: items wait in a real :class:`PlayQueue` until the test takes
    them (``play_next``), and ``submit`` refuses as the real one does when it is full."""

    def __init__(self, maxsize: int) -> None:
        self.queue = PlayQueue(maxsize)
        self.played: list[str] = []

    def submit(self, item: PlayItem) -> None:
        item._bind(lambda: None)
        self.queue.push(item)

    def has_room(self, priority: int, timeout: float = 0.0) -> bool:
        return self.queue.wait_room(priority, timeout)

    def play_next(self) -> str:
        item = self.queue.pop()
        assert item is not None
        self.played.append(item.request_id)
        return item.request_id


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30  # generous; never asserted as a timing
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        threading.Event().wait(0.01)


@pytest.fixture()
def tiny_voices(tiny_voice_dir: Path) -> VoiceLibrary:
    return VoiceLibrary(Settings(device_id="d1", models={
        "dir": tiny_voice_dir.parent, "default_voice": "tiny-test", "watch": False}))


def test_worker_waits_for_room_instead_of_failing_and_urgent_goes_first(
        tiny_voices: VoiceLibrary, tracker: RequestTracker, sent: Sent) -> None:
    jobs = JobQueue(8)
    player = BehindPlayer(maxsize=1)
    worker = SynthesisWorker(jobs, tiny_voices, player, tracker)
    for request_id in ("n1", "n2", "n3", "u1"):
        tracker.open(request_id, "speak")
    worker.start()
    try:
        for request_id in ("n1", "n2", "n3"):
            jobs.put(job(request_id))
        wait_until(lambda: len(player.queue) == 1 and len(jobs) == 2, "n1 to be submitted")
        steps = worker.steps
        wait_until(lambda: worker.steps > steps + 3, "the worker to look again")
        assert len(jobs) == 2 and tracker.pending() == 4  # n2, n3 wait: nothing failed
        jobs.put(job("u1", "urgent"))  # overtakes the full play queue
        wait_until(lambda: len(player.queue) == 2, "the urgent job to be submitted")
        assert player.play_next() == "u1"
        assert player.play_next() == "n1"
        wait_until(lambda: len(player.queue) == 1, "room to be used")
        assert player.play_next() == "n2"
        wait_until(lambda: len(player.queue) == 1, "room to be used")
        assert player.play_next() == "n3"
    finally:
        worker.stop(5)
    assert player.played == ["u1", "n1", "n2", "n3"]
    assert not [e for e in sent.events() if e["final"]], sent.events()


def test_a_job_waiting_for_room_expires_and_a_stop_clears_it(
        tiny_voices: VoiceLibrary, tracker: RequestTracker, sent: Sent) -> None:
    jobs = JobQueue(8)
    player = BehindPlayer(maxsize=1)
    worker = SynthesisWorker(jobs, tiny_voices, player, tracker)
    for request_id in ("first", "late", "cleared"):
        tracker.open(request_id, "speak")
    worker.start()
    try:
        jobs.put(job("first"))
        wait_until(lambda: len(player.queue) == 1, "the first job to be submitted")
        command = SpeakCommand(id="late", text="Too late.")
        jobs.put(SpeakJob("late", speak_request(command), time.monotonic() + 0.2))
        jobs.put(job("cleared"))
        wait_until(lambda: not tracker.is_open("late"), "the waiting job to expire")
        assert [j.request_id for j in jobs.take_all()] == ["cleared"]  # what a stop does
    finally:
        worker.stop(5)
    finals = {e["id"]: e for e in sent.events() if e["final"]}
    assert (finals["late"]["event"], finals["late"]["reason"]) == (
        "expired", "expired before synthesis started")
    head = player.queue.head()
    assert len(player.queue) == 1 and head is not None and head.request_id == "first"


class Controls:
    """Records what the dispatcher asks of the player."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def stop(self, flush: bool = False) -> None:
        self.calls.append(("stop", flush))

    def set_volume(self, volume: float) -> None:
        self.calls.append(("volume", volume))


def request(command: SpeakCommand | StopCommand, *, deadline: float | None = None,
            received: float | None = None) -> Request:
    name = "speak" if isinstance(command, SpeakCommand) else "stop"
    return Request(command, name, None, None, None, deadline,
                   time.monotonic() if received is None else received)


def make_dispatcher(tracker: RequestTracker, controls: Controls) -> tuple[Dispatcher, JobQueue]:
    jobs = JobQueue(2)
    dispatcher = Dispatcher(
        queue.Queue(), jobs, tracker, controls, voice_names=lambda: ["v1"], default_voice="v1",
        status=lambda: None,  # type: ignore[arg-type, return-value]
        reload=lambda command: ["v1"],
    )
    return dispatcher, jobs


def test_speak_deadline_takes_the_earliest() -> None:
    now = time.monotonic()
    command = SpeakCommand(id="a", text="x", expires_in_s=10.0)
    assert speak_deadline(command, request(command, received=now)) == pytest.approx(now + 10)
    assert speak_deadline(command, request(command, deadline=now + 3, received=now)) == now + 3
    absolute = SpeakCommand(id="a", text="x", expires_at=time.time() + 100, expires_in_s=200.0)
    assert speak_deadline(absolute, request(absolute, received=now)) == pytest.approx(
        now + 100, abs=1)
    plain = SpeakCommand(id="a", text="x")
    assert speak_deadline(plain, request(plain)) is None


def test_dispatch_speak_outcomes(tracker: RequestTracker, sent: Sent) -> None:
    controls = Controls()
    dispatcher, jobs = make_dispatcher(tracker, controls)
    dispatcher.handle(request(SpeakCommand(id="ok", text="x", priority="high")))
    dispatcher.handle(request(SpeakCommand(id="ghost", text="x", voice="v9")))
    dispatcher.handle(request(SpeakCommand(id="old", text="x"), deadline=time.monotonic() - 1))
    dispatcher.handle(request(SpeakCommand(id="ok2", text="x")))
    dispatcher.handle(request(SpeakCommand(id="full", text="x")))
    outcome = {e["id"]: (e["event"], e.get("reason")) for e in sent.events()}
    assert outcome["ok"] == ("accepted", None) and outcome["ok2"] == ("accepted", None)
    assert outcome["ghost"] == ("rejected", "unknown voice 'v9' (installed: v1)")
    assert outcome["old"] == ("expired", "expired before it was accepted")
    assert outcome["full"] == ("rejected", "busy: 2 speak requests already queued")
    assert len(jobs) == 2 and tracker.pending() == 2
    dispatcher.handle(request(StopCommand(id="s", clear_queue=True)))
    assert controls.calls == [("stop", True)]
    finals = {e["id"]: e for e in sent.events() if e["final"]}
    assert finals["ok"]["event"] == "interrupted" and finals["ok"]["reason"] == "cleared by stop"
    assert finals["s"]["event"] == "done" and finals["s"]["pending"] == 2
    assert len(jobs) == 0 and tracker.pending() == 0


def test_a_handler_that_raises_gets_one_final_answer(tracker: RequestTracker, sent: Sent) -> None:
    """Raising after its answer went out (``on_ping``) adds no ``failed``; raising before
    (``on_volume``) is answered ``failed``; either way the dispatcher keeps serving."""
    def broken(*_: object) -> None:
        raise RuntimeError("handler bug")

    dispatcher, _ = make_dispatcher(tracker, Controls())
    dispatcher.on_ping = broken
    dispatcher.on_volume = lambda volume: broken()
    commands = ((PingCommand(id="p1"), "ping"), (VolumeCommand(id="v1", volume=0.5), "volume"),
                (PingCommand(id="p2"), "ping"))
    for command, name in commands:
        dispatcher.requests.put(Request(command, name, None, None, None, None, time.monotonic()))
    dispatcher.start()
    try:
        wait_until(lambda: dispatcher.steps == 3, "the three requests handled")
    finally:
        dispatcher.stop(5)
    finals = [(e["id"], e["event"]) for e in sent.events() if e["final"]]
    assert finals == [("p1", "pong"), ("v1", "failed"), ("p2", "pong")], finals
