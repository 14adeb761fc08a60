"""Delivery over a real Mosquitto (issue #14): retained commands, corrected retries, repeated ids
and Response Topics. Real synthesis (the tiny voice, or the stall voice where a request must
stay open), real alsa-lib playback into an ALSA file PCM.

- A retained command is refused whether it was left on the broker or published while the agent
  is subscribed (MQTT 5: the agent subscribes with Retain-As-Published). Under MQTT 3.1.1 a live
  retained command cannot be told apart; it is spoken once and refused when re-delivered.
- A rejection of any kind does not use up the id: the corrected retry is served.
- A repeated id is answered: ``in_progress`` while the original is open (its final event follows,
  also on the repeat's Response Topic), a final ``duplicate`` naming the original outcome after.
- A Response Topic under the prefix is refused unless it is in the reply space or the device's
  own events topic.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import Namespace, Topic, TopicFilter
from agent.settings import Settings
from tests.support import stall_voice
from tests.support.broker import (
    Broker,
    Recorder,
    agent_env,
    agent_settings,
    daemon,
    running_agent,
)
from tests.support.cli import agent_cli
from tests.support.controller import agent_fixture, controller_fixture

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
DEV = NS.device("t1")
OTHER = NS.device("t2")
EVERYTHING = TopicFilter("tts/#")


def events_for(recorder: Recorder, request_id: str) -> list[dict[str, Any]]:
    return [e for e in recorder.json_on(DEV.events) if e.get("id") == request_id]


def kinds_for(recorder: Recorder, request_id: str) -> list[str]:
    return [e["event"] for e in events_for(recorder, request_id)]


def final_for(recorder: Recorder, request_id: str, timeout: float = 30, *,
              after: int = 0) -> dict[str, Any]:
    """The final event for ``request_id`` that comes after ``after`` earlier final ones."""
    def match(event: dict[str, Any]) -> bool:
        return event["id"] == request_id and event["final"]

    recorder.wait_for(lambda m: m.topic == DEV.events and sum(
        match(e) for e in events_for(recorder, request_id)) > after, timeout)
    return [e for e in events_for(recorder, request_id) if e["final"]][after]


def barrier(recorder: Recorder, name: str) -> None:
    """Wait for a ``ping`` published after everything before it has been answered."""
    recorder.publish(DEV.command("ping"), {"id": name})
    final_for(recorder, name)


@pytest.fixture()
def settings(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Settings:
    return agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")


agent = agent_fixture(settings="settings")
controller = controller_fixture([EVERYTHING])  # everything under the prefix, once online


def clear_retained(recorder: Recorder, topic: Topic) -> None:
    recorder.publish(topic, b"", retain=True)


# -- 4: retained commands ------------------------------------------------------------------


def test_live_retained_command_is_refused_over_mqtt5(agent: AgentService,
                                                     controller: Recorder) -> None:
    """Published with the retain flag while the agent is subscribed: refused, not spoken."""
    try:
        controller.publish(DEV.command("speak"), {"id": "live-ret", "text": "Retained."},
                           retain=True)
        final = final_for(controller, "live-ret")
    finally:
        clear_retained(controller, DEV.command("speak"))
    assert final["event"] == "rejected" and "retained" in final["reason"], final
    barrier(controller, "after-ret")
    assert kinds_for(controller, "live-ret") == ["rejected"]  # never accepted, not spoken
    controller.publish(DEV.command("speak"), {"id": "live-ret", "text": "Not retained."})
    assert final_for(controller, "live-ret", after=1)["event"] == "finished"


def test_retained_command_over_mqtt311_is_spoken_once(mqtt_broker: Broker, tiny_voice_dir: Path,
                                                      tmp_path: Path) -> None:
    """MQTT 3.1.1 delivers a live retained message with retain=0, so it is spoken; when the
    broker delivers it again on the next subscription (retain=1) it is refused, not replayed."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": "3.1.1"})
    with running_agent(settings), Recorder(mqtt_broker.settings(), [EVERYTHING], "ctl-311",
                                           persistent=True) as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        ctl.publish(DEV.command("speak"), {"id": "ret-311", "text": "Retained."}, retain=True)
        assert final_for(ctl, "ret-311")["event"] == "finished"
        mqtt_broker.restart()  # the agent reconnects and subscribes again
        second = final_for(ctl, "ret-311", after=1, timeout=60)
        clear_retained(ctl, DEV.command("speak"))
    assert second["event"] == "rejected" and "retained" in second["reason"]
    assert kinds_for(ctl, "ret-311") == ["accepted", "started", "finished", "rejected"]


# -- 5: corrected retries ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"text": "Doors closing.", "colour": "red"}, "unknown field 'colour'"),
        ({"text": "Doors closing.", "voice": "nobody"}, "unknown voice"),
        ({"text": "Doors closing.", "expires_at": 1_000_000_000.0}, None),
    ],
)
def test_corrected_retry_is_served(controller: Recorder, bad: dict[str, Any],
                                   reason: str | None) -> None:
    controller.publish(DEV.command("speak"), {"id": "fix-1", **bad})
    first = final_for(controller, "fix-1")
    assert first["event"] in ("rejected", "expired") and (reason or "") in first["reason"]
    controller.publish(DEV.command("speak"), {"id": "fix-1", "text": "Doors closing."})
    assert final_for(controller, "fix-1", after=1)["event"] == "finished"
    assert kinds_for(controller, "fix-1")[1:] == ["accepted", "started", "finished"]


@pytest.fixture()
def stalled(mqtt_broker: Broker, tmp_path: Path) -> Iterator[tuple[Settings, Recorder]]:
    """An agent process whose synthesis is stuck in the stall voice's model (``hang``), with
    a speak queue of 2, and a controller watching everything; the process is killed after."""
    models = tmp_path / "models"
    stall_voice.build_bundle(models)
    settings = agent_settings(mqtt_broker, models, tmp_path / "agent", voice=stall_voice.VOICE,
                              mqtt={"intake_queue": 2})
    with daemon(settings, tmp_path / "agent.log") as process, \
            Recorder(mqtt_broker.settings(), [EVERYTHING], "ctl") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=60)
        ctl.publish(DEV.command("speak"), {"id": "hang", "text": "Stuck.",
                                           "speed": stall_voice.HANG_SPEED})
        ctl.wait_json(DEV.events, lambda e: e["id"] == "hang" and e["event"] == "accepted")
        try:
            yield settings, ctl
        finally:
            process.send_signal(signal.SIGKILL)


def fill_until_busy(ctl: Recorder) -> str:
    """Queue speak requests behind the stuck one until one is refused as busy; its id."""
    for n in range(10):
        request_id = f"fill-{n}"
        ctl.publish(DEV.command("speak"), {"id": request_id, "text": "Queued."})
        event = ctl.wait_json(DEV.events, lambda e, rid=request_id: e["id"] == rid)  # type: ignore[misc]
        if event["event"] == "rejected":
            assert "busy" in event["reason"], event
            return request_id
        assert event["event"] == "accepted", event
    raise AssertionError("the speak queue never filled")


def test_retry_after_busy_is_served(stalled: tuple[Settings, Recorder]) -> None:
    _, ctl = stalled
    busy = fill_until_busy(ctl)
    ctl.publish(DEV.command("stop"), {"id": "clear", "clear_queue": True})
    assert final_for(ctl, "clear")["event"] == "done"
    ctl.publish(DEV.command("speak"), {"id": busy, "text": "Queued."})
    accepted = ctl.wait_json(DEV.events, lambda e: e["id"] == busy and e["event"] == "accepted")
    assert accepted["final"] is False
    assert kinds_for(ctl, busy) == ["rejected", "accepted"]


# -- 6: repeated ids -----------------------------------------------------------------------


def test_repeat_after_the_end_names_the_original_outcome(agent: AgentService,
                                                         controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"id": "dup-1", "text": "Only once."})
    assert final_for(controller, "dup-1")["event"] == "finished"
    controller.publish(DEV.command("speak"), {"id": "dup-1", "text": "Only once."})
    repeat = final_for(controller, "dup-1", after=1)
    assert repeat["event"] == "duplicate" and repeat["outcome"] == "finished", repeat
    assert repeat["command"] == "speak"
    controller.publish(DEV.command("reload"), {"id": "dup-2", "voice": "ghost"})
    failed = final_for(controller, "dup-2")
    controller.publish(DEV.command("reload"), {"id": "dup-2", "voice": "ghost"})
    again = final_for(controller, "dup-2", after=1)
    assert (again["event"], again["outcome"], again["reason"]) == (
        "duplicate", "failed", failed["reason"])
    # accepted and started once: it was not queued, nor spoken, again
    assert kinds_for(controller, "dup-1") == ["accepted", "started", "finished", "duplicate"]


def test_repeat_while_open_gets_the_final_on_its_own_response_topic(
        mqtt_broker: Broker, stalled: tuple[Settings, Recorder]) -> None:
    _, ctl = stalled
    reply = Topic("ctl/replies/dup")
    with Recorder(mqtt_broker.settings(), [reply.as_filter()], "replies") as replies:
        ctl.publish(DEV.command("speak"), {"id": "queued-1", "text": "Queued."},
                    response_topic=reply, correlation_data=b"first")
        ctl.wait_json(DEV.events, lambda e: e["id"] == "queued-1" and e["event"] == "accepted")
        ctl.publish(DEV.command("speak"), {"id": "queued-1", "text": "Queued."},
                    response_topic=reply, correlation_data=b"second")
        pending = ctl.wait_json(DEV.events, lambda e: e["id"] == "queued-1"
                                and e["event"] == "in_progress")
        assert pending["final"] is False and "duplicate" in pending["reason"]
        ctl.publish(DEV.command("stop"), {"id": "clear", "clear_queue": True})
        assert final_for(ctl, "clear")["event"] == "done"
        for correlation in (b"first", b"second"):
            message = replies.wait_for(lambda m, c=correlation: m.correlation_data == c)  # type: ignore[misc]
            assert json.loads(message.payload)["event"] == "interrupted"
    assert kinds_for(ctl, "queued-1") == ["accepted", "in_progress", "interrupted"]


def send(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return agent_cli("send", "--device", "t1", *args, "--wait", "--timeout", "20",
                     env=agent_env(settings), timeout=90)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_send_wait_reports_a_repeat_with_the_original_exit_code(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, protocol: str) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": protocol})
    with running_agent(settings):
        assert send(settings, "ping", "--id", "cli-dup").returncode == 0
        result = send(settings, "ping", "--id", "cli-dup")
        assert result.returncode == 0, result.stderr
        repeat = json.loads(result.stdout)
        assert (repeat["event"], repeat["outcome"]) == ("duplicate", "pong")
        assert send(settings, "reload", "--voice", "ghost", "--id", "cli-bad").returncode == 1
        result = send(settings, "reload", "--voice", "ghost", "--id", "cli-bad")
        assert result.returncode == 1, result.stderr
        assert json.loads(result.stdout)["outcome"] == "failed"


# -- 8: response topics --------------------------------------------------------------------


@pytest.mark.parametrize("response_topic", [
    OTHER.events, OTHER.status, DEV.status, DEV.health, NS.root.child("t2", "x"),
    NS.root.child("group", "g", "events"), NS.root,
])
def test_response_topic_under_the_prefix_is_refused(controller: Recorder,
                                                    response_topic: Topic) -> None:
    controller.publish(DEV.command("ping"), {"id": "rt-1"}, response_topic=response_topic)
    final = final_for(controller, "rt-1")
    assert final["event"] == "rejected" and "response topic" in final["reason"], final
    barrier(controller, "rt-after")
    assert [m for m in controller.messages if m.topic == response_topic
            and b'"rt-1"' in m.payload] == []
    assert kinds_for(controller, "rt-1") == ["rejected"]


def test_reply_space_and_own_events_are_allowed(controller: Recorder) -> None:
    for n, topic in enumerate((NS.reply("ctl-9"), DEV.events)):
        controller.publish(DEV.command("ping"), {"id": f"ok-{n}"}, response_topic=topic,
                           correlation_data=b"c")
        assert final_for(controller, f"ok-{n}")["event"] == "pong"
        controller.wait_for(lambda m, t=topic, i=f"ok-{n}": m.topic == t  # type: ignore[misc]
                            and m.correlation_data == b"c" and json.loads(m.payload)["id"] == i)
