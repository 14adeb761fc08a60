"""The request journal across a crash (issue #14, item 10): the agent as a process, a real
Mosquitto, the stall voice to hold a queue (its first request never leaves synthesis, so the
others stay queued), real alsa-lib playback into an ALSA file PCM.

The agent is killed with SIGKILL while requests are accepted and unfinished, then started
again on the same cache directory. Every journalled request gets exactly one final event, on
the events topic, on its Response Topic (with its Correlation Data) and, for a Hermes say, on
``hermes/error/tts`` and ``hermes/tts/sayFinished``, before a command sent after the restart
is served. With ``mqtt.journal.replay`` the queued ones are played instead; the one that had
begun (and may have been heard) is never played again.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY, HERMES_SAY_FINISHED, Namespace, Topic
from agent.settings import Settings
from tests.support import stall_voice
from tests.support.broker import Broker, Recorder, agent_settings, daemon

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
REPLIES = Topic("ctl/replies/t1")
QUEUED = [f"q-{index}" for index in range(30)]
"""Speak requests queued behind the stalled one when the agent is killed."""
WITH_REPLY = "q-7"
HERMES_ID = "h-1"
WAIT_S = 90.0  # generous upper bound on a daemon start on a loaded machine; never asserted


def settings_for(broker: Broker, tmp_path: Path, **journal: Any) -> Settings:
    models = tmp_path / "models"
    if not (models / stall_voice.VOICE).is_dir():
        stall_voice.build_bundle(models)
    return agent_settings(broker, models, tmp_path / "agent", voice=stall_voice.VOICE,
                          mqtt={"journal": journal} if journal else None)


def events_for(rec: Recorder, request_id: str) -> list[dict[str, Any]]:
    return [e for e in rec.json_on(DEV.events) if e.get("id") == request_id]


def finals_for(rec: Recorder, request_id: str) -> list[dict[str, Any]]:
    return [e for e in events_for(rec, request_id) if e["final"]]


def wait_final(rec: Recorder, request_id: str) -> dict[str, Any]:
    return rec.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"], WAIT_S)


def wait_online(rec: Recorder, times: int) -> None:
    """Wait until the agent has said ``online`` ``times`` times (once per start)."""
    def enough(_: Any) -> bool:
        return sum(p.get("state") == "online" for p in rec.json_on(DEV.status)) >= times
    rec.wait_for(lambda m: m.topic == DEV.status and enough(m), WAIT_S)


@pytest.fixture()
def rec(mqtt_broker: Broker) -> Iterator[Recorder]:
    filters = [DEV.events.as_filter(), DEV.status.as_filter(), REPLIES.as_filter(),
               HERMES_ERROR.as_filter(), HERMES_SAY_FINISHED.as_filter()]
    with Recorder(mqtt_broker.settings(), filters, "controller") as recorder:
        yield recorder


def queue_and_kill(rec: Recorder, settings: Settings, log: Path, *,
                   expiring: str | None = None) -> list[str]:
    """Start the agent, stall its synthesis, queue the requests, SIGKILL it; the ids queued."""
    with daemon(settings, log) as agent:
        wait_online(rec, 1)
        rec.publish(DEV.command("speak"), {"id": "hang", "text": "This one never ends.",
                                           "speed": stall_voice.HANG_SPEED})
        ids = ["hang"]
        if expiring is not None:
            rec.publish(DEV.command("speak"), {"id": expiring, "text": "Soon too late.",
                                               "expires_in_s": 1.0})
            ids.append(expiring)
        for request_id in QUEUED:
            extra = ({"response_topic": REPLIES, "correlation_data": b"corr-7"}
                     if request_id == WITH_REPLY else {})
            rec.publish(DEV.command("speak"), {"id": request_id, "text": "Doors closing."},
                        **extra)
        rec.publish(HERMES_SAY, {"id": HERMES_ID, "siteId": "t1", "text": "Mind the gap."})
        ids += [*QUEUED, HERMES_ID]
        for request_id in ids:
            rec.wait_json(DEV.events, lambda e, rid=request_id: (
                e["id"] == rid and e["event"] == "accepted"), WAIT_S)
        agent.send_signal(signal.SIGKILL)
        assert agent.wait(30) == -signal.SIGKILL
    assert not any(finals_for(rec, request_id) for request_id in ids)  # nobody answered them
    return ids


def serve_one_after_restart(rec: Recorder) -> None:
    """Once the second start is online: a request sent now is served."""
    wait_online(rec, 2)
    rec.publish(DEV.command("speak"), {"id": "after", "text": "Back again."})
    assert wait_final(rec, "after")["event"] == "finished"


def final_positions(rec: Recorder, ids: list[str]) -> tuple[list[int], int]:
    events = rec.json_on(DEV.events)
    finals = [i for i, e in enumerate(events) if e["id"] in ids and e["final"]]
    after = next(i for i, e in enumerate(events) if e["id"] == "after")
    return finals, after


def test_requests_accepted_before_a_crash_are_answered_after_the_restart(
        mqtt_broker: Broker, rec: Recorder, tmp_path: Path) -> None:
    settings = settings_for(mqtt_broker, tmp_path)
    ids = queue_and_kill(rec, settings, tmp_path / "first.log")
    with daemon(settings, tmp_path / "second.log") as agent:
        serve_one_after_restart(rec)
        for request_id in ids:
            final = wait_final(rec, request_id)
            assert final["event"] == "failed" and final["reason"] == "agent restarted", final
            assert final["command"] == "speak" and final["device"] == "t1"
        finals, after = final_positions(rec, ids)
        assert len(finals) == len(ids)  # exactly one each...
        assert max(finals) < after  # ...all of them before the first new command
        reply = rec.wait_for(lambda m: m.topic == REPLIES, WAIT_S)
        assert reply.correlation_data == b"corr-7"
        assert json.loads(reply.payload)["id"] == WITH_REPLY
        error = rec.wait_json(HERMES_ERROR, lambda p: p["context"] == HERMES_ID, WAIT_S)
        assert error["error"] == "agent restarted" and error["siteId"] == "t1"
        rec.wait_json(HERMES_SAY_FINISHED, lambda p: p["id"] == HERMES_ID, WAIT_S)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
    assert [len(finals_for(rec, request_id)) for request_id in ids] == [1] * len(ids)

    # A third start has nothing left to answer.
    with daemon(settings, tmp_path / "third.log") as agent:
        wait_online(rec, 3)
        rec.publish(DEV.command("ping"), {"id": "third"})
        assert wait_final(rec, "third")["event"] == "pong"
    assert [len(finals_for(rec, request_id)) for request_id in ids] == [1] * len(ids)


def test_with_replay_queued_requests_are_played_after_the_restart(
        mqtt_broker: Broker, rec: Recorder, tmp_path: Path) -> None:
    settings = settings_for(mqtt_broker, tmp_path, replay=True)
    accepted_at = time.monotonic()
    ids = queue_and_kill(rec, settings, tmp_path / "first.log", expiring="soon")
    pause = threading.Event()
    while time.monotonic() - accepted_at < 1.5:  # let "soon" pass its deadline
        pause.wait(0.1)
    with daemon(settings, tmp_path / "second.log") as agent:
        serve_one_after_restart(rec)
        for request_id in [*QUEUED, HERMES_ID]:
            final = wait_final(rec, request_id)
            assert final["event"] == "finished", final
            assert final["replayed"] is True
            kinds = [e["event"] for e in events_for(rec, request_id)]
            assert kinds.count("started") == 1  # played once
        hang = wait_final(rec, "hang")
        assert hang["event"] == "failed"
        assert hang["reason"] == "agent restarted; it had begun, so it is not played again"
        soon = wait_final(rec, "soon")
        assert soon["event"] == "failed"
        assert soon["reason"] == "agent restarted; it expired before it could be played"
        reply = rec.wait_for(lambda m: m.topic == REPLIES, WAIT_S)
        assert reply.correlation_data == b"corr-7"
        assert json.loads(reply.payload)["event"] == "finished"
        rec.wait_json(HERMES_SAY_FINISHED, lambda p: p["id"] == HERMES_ID, WAIT_S)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
    assert [len(finals_for(rec, request_id)) for request_id in ids] == [1] * len(ids)
    assert not rec.json_on(HERMES_ERROR)  # the say was played, not failed


def test_a_request_that_finished_before_a_crash_is_not_spoken_again_after_it(
        mqtt_broker: Broker, rec: Recorder, tmp_path: Path) -> None:
    """#14, nothing spoken twice: the repeat memory survives a SIGKILL. A resend of a speak
    request that had finished before the crash gets the final ``duplicate`` naming the
    original outcome after the restart, and is not played again."""
    settings = settings_for(mqtt_broker, tmp_path)
    speak = {"id": "once", "text": "Doors closing."}
    with daemon(settings, tmp_path / "first.log") as agent:
        wait_online(rec, 1)
        rec.publish(DEV.command("speak"), speak)
        assert wait_final(rec, "once")["event"] == "finished"
        agent.send_signal(signal.SIGKILL)
        assert agent.wait(30) == -signal.SIGKILL
    before = len(events_for(rec, "once"))
    with daemon(settings, tmp_path / "second.log") as agent:
        wait_online(rec, 2)
        rec.publish(DEV.command("speak"), speak)  # the controller resends it
        repeat = rec.wait_json(DEV.events, lambda e: (
            e["id"] == "once" and e["event"] == "duplicate"), WAIT_S)
        assert repeat["final"] and repeat["outcome"] == "finished", repeat
        serve_one_after_restart(rec)  # served in order after the resend: nothing else follows
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
    after = [e["event"] for e in events_for(rec, "once")[before:]]
    assert after == ["duplicate"]  # no accepted, no started: not spoken again
