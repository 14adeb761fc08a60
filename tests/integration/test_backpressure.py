"""Backpressure from the player to the job queue (#14 item 7), over a real Mosquitto into real
alsa-lib: a speak request is either refused with ``busy`` before ``accepted``, or it is played.

The ALSA ``file`` PCM over ``null`` takes audio as fast as it is written; a sound card plays it
in real time. :class:`~tests.support.paced_sink.PacedSink` stands in for one: the file PCM
writes into a named pipe that the test reads at the voice's byte rate, so the player's writes
block as they do on a card (and :meth:`PacedSink.hold` stops reading altogether, to build a
backlog on purpose). Small queue settings keep the backlogs short.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import Namespace
from tests.support.broker import (
    Broker,
    Recorder,
    agent_settings,
    alsa_file_device,
    running_agent,
)
from tests.support.paced_sink import BYTES_PER_S, PacedSink

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
WAIT_S = 120.0  # generous bound for a whole backlog to play; never asserted as a timing


@pytest.fixture()
def sink(tmp_path: Path) -> Iterator[PacedSink]:
    paced = PacedSink(tmp_path / "card.fifo", BYTES_PER_S)
    yield paced
    paced.close()


def start_agent(broker: Broker, models: Path, work: Path, sink: PacedSink, *,
                queue_max: int, intake_queue: int) -> contextlib.AbstractContextManager[
                    AgentService]:
    settings = agent_settings(broker, models, work, mqtt={"intake_queue": intake_queue},
                              audio={"device": alsa_file_device(sink.path),
                                     "queue_max": queue_max, "keep_open_s": 60.0,
                                     # a held sink is a slow card here, not a broken one
                                     "device_timeout_s": 120.0})
    return running_agent(settings)


@contextlib.contextmanager
def controller(broker: Broker) -> Iterator[Recorder]:
    with Recorder(broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
                  "controller") as recorder:
        recorder.wait_json(DEV.status, lambda p: p["state"] == "online")
        yield recorder


def events_by_id(recorder: Recorder, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    wanted = set(ids)
    found: dict[str, list[dict[str, Any]]] = {request_id: [] for request_id in ids}
    for event in recorder.json_on(DEV.events):
        if event.get("id") in wanted:
            found[event["id"]].append(event)
    return found


def wait_for_finals(recorder: Recorder, ids: list[str]) -> dict[str, dict[str, Any]]:
    return {request_id: recorder.wait_json(
        DEV.events, lambda e, rid=request_id: e["id"] == rid and e["final"], WAIT_S)
        for request_id in ids}


def assert_each_accepted_one_played(recorder: Recorder, ids: list[str]) -> None:
    for request_id, events in events_by_id(recorder, ids).items():
        kinds = [e["event"] for e in events]
        assert kinds == ["accepted", "started", "finished"], (request_id, events)


def test_a_backlog_of_a_cached_phrase_is_played_not_failed(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, sink: PacedSink) -> None:
    phrase = "Mind the gap."
    with start_agent(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", sink,
                     queue_max=3, intake_queue=64), controller(mqtt_broker) as ctl:
        ctl.publish(DEV.command("speak"), {"id": "warm", "text": phrase})
        assert wait_for_finals(ctl, ["warm"])["warm"]["event"] == "finished"  # now cached
        ids = [f"copy-{n}" for n in range(20)]
        for request_id in ids:
            ctl.publish(DEV.command("speak"), {"id": request_id, "text": phrase})
        finals = wait_for_finals(ctl, ids)
    assert {f["event"] for f in finals.values()} == {"finished"}, finals
    assert_each_accepted_one_played(ctl, ids)
    assert sink.received > 0


def test_short_distinct_texts_on_a_paced_sink_are_all_played(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, sink: PacedSink) -> None:
    with start_agent(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", sink,
                     queue_max=3, intake_queue=64), controller(mqtt_broker) as ctl:
        ids = [f"text-{n}" for n in range(24)]
        for n, request_id in enumerate(ids):
            ctl.publish(DEV.command("speak"), {"id": request_id, "text": f"Gate {n} is open."})
        finals = wait_for_finals(ctl, ids)
    assert {f["event"] for f in finals.values()} == {"finished"}, finals
    assert_each_accepted_one_played(ctl, ids)


def test_beyond_the_job_queue_bound_the_answer_is_busy_never_accepted(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, sink: PacedSink) -> None:
    job_queue, play_queue = 4, 2
    with start_agent(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", sink,
                     queue_max=play_queue, intake_queue=job_queue), \
            controller(mqtt_broker) as ctl:
        sink.hold()  # the card stops taking audio: the backlog builds up
        ids = [f"burst-{n}" for n in range(16)]
        for n, request_id in enumerate(ids):
            ctl.publish(DEV.command("speak"), {"id": request_id,
                                               "text": f"Platform {n} is closed for cleaning."})
        for request_id in ids:  # every request is either accepted or already answered
            ctl.wait_json(DEV.events, lambda e, rid=request_id: e["id"] == rid and (
                e["final"] or e["event"] == "accepted"), WAIT_S)
        sink.release()
        finals = wait_for_finals(ctl, ids)
    events = events_by_id(ctl, ids)
    accepted = [rid for rid in ids if events[rid][0]["event"] == "accepted"]
    refused = [rid for rid in ids if rid not in accepted]
    for request_id in accepted:
        assert [e["event"] for e in events[request_id]] == ["accepted", "started", "finished"]
    for request_id in refused:
        assert [e["event"] for e in events[request_id]] == ["rejected"], events[request_id]
        assert finals[request_id]["reason"].startswith("busy"), finals[request_id]
    assert refused, "a held sink never made the agent answer busy"
    # What can be accepted while the card holds: the job queue, the play queue, the
    # utterance playing and the one the worker hands over.
    assert len(accepted) <= job_queue + play_queue + 2, accepted


def test_an_urgent_request_still_interrupts_during_a_backlog(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, sink: PacedSink) -> None:
    with start_agent(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", sink,
                     queue_max=2, intake_queue=16), controller(mqtt_broker) as ctl:
        sink.hold()
        long_text = " ".join(f"This is sentence {n} of the timetable." for n in range(40))
        ctl.publish(DEV.command("speak"), {"id": "long", "text": long_text})
        ctl.wait_json(DEV.events, lambda e: e["id"] == "long" and e["event"] == "started")
        normals = [f"normal-{n}" for n in range(8)]
        for n, request_id in enumerate(normals):
            ctl.publish(DEV.command("speak"), {"id": request_id, "text": f"Train {n}."})
        for request_id in normals:
            ctl.wait_json(DEV.events, lambda e, rid=request_id: e["id"] == rid and (
                e["event"] == "accepted"), WAIT_S)
        ctl.publish(DEV.command("speak"), {"id": "fire", "text": "Fire alarm.",
                                           "priority": "urgent"})
        ctl.wait_json(DEV.events, lambda e: e["id"] == "fire" and e["event"] == "accepted")
        sink.release()
        finals = wait_for_finals(ctl, ["long", "fire", *normals])
    assert finals["long"]["event"] == "interrupted", finals["long"]
    assert finals["fire"]["event"] == "finished", finals["fire"]
    assert {finals[rid]["event"] for rid in normals} == {"finished"}, finals
    started = [e["id"] for e in ctl.json_on(DEV.events) if e["event"] == "started"]
    assert started[:2] == ["long", "fire"], started  # the urgent one went before the backlog
