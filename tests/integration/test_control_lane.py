"""Control commands never wait behind speaks (#27 item 6), against a real Mosquitto: a flood of
Home Assistant notify messages and speak commands fills the intake's speak lane, and every ping
sent in the middle of it is answered ``pong``, never ``busy``; a ``stop`` sent after the flood
still ends every speak queued before it. And the notify topic's Response Topic (#27 item 7):
its final events go there too, with the correlation data, under the command topics' rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import Namespace, Topic
from tests.support.broker import Broker, Recorder, agent_settings, running_agent
from tests.support.controller import final_for, online_controller
from tests.support.raw_mqtt import RawPublisher

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
DEV = NS.device("t1")
FLOOD = 400
PING_EVERY = 16
WAIT_S = 120.0


def _flood(raw: RawPublisher) -> list[str]:
    """Publish ``FLOOD`` speaks, notify text and speak commands in turn, with a ping after every
    ``PING_EVERY`` of them; returns the pings' ids."""
    pings = []
    for n in range(FLOOD):
        if n % 2:
            raw.publish(DEV.ha_notify.value, f"Flood message {n}.".encode())
        else:
            raw.publish(DEV.command("speak").value,
                        json.dumps({"id": f"s{n}", "text": f"Speak {n}."}).encode())
        if n % PING_EVERY == PING_EVERY - 1:
            pings.append(f"ping-{n}")
            raw.publish(DEV.command("ping").value, json.dumps({"id": pings[-1]}).encode())
    return pings


def test_pings_are_answered_pong_during_a_flood_of_speaks(mqtt_broker: Broker,
                                                          tiny_voice_dir: Path,
                                                          tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"ha_discovery": True, "intake_queue": 16})
    with running_agent(settings), online_controller(mqtt_broker) as ctl, \
            RawPublisher(mqtt_broker, "flood") as raw:
        pings = _flood(raw)
        ctl.publish(DEV.command("stop"), {"id": "halt", "clear_queue": True})
        finals = {ping: final_for(ctl, ping, WAIT_S) for ping in pings}
        halt = final_for(ctl, "halt", WAIT_S)
        speaks = [f"s{n}" for n in range(0, FLOOD, 2)]
        ended = {s: final_for(ctl, s, WAIT_S) for s in speaks}
        events = ctl.json_on(DEV.events)
    not_pong = {ping: (e["event"], e.get("reason")) for ping, e in finals.items()
                if e["event"] != "pong"}
    assert not not_pong, f"{len(not_pong)} of {len(pings)} pings: {not_pong}"
    assert halt["event"] == "done"
    for request_id in [*pings, *speaks, "halt"]:  # exactly one final each
        assert sum(1 for e in events if e["id"] == request_id and e["final"]) == 1, request_id
    # the stop came after every speak: none is still open or starts after its answer
    halt_at = next(i for i, e in enumerate(events) if e["id"] == "halt" and e["final"])
    assert all(e["id"] not in ended or e["event"] != "accepted" for e in events[halt_at:])
    assert {e["event"] for e in ended.values()} <= {"rejected", "interrupted", "finished"}


def _notify_with_reply(ctl: Recorder, payload: bytes | str, reply: Topic,
                       correlation: bytes) -> None:
    ctl.publish(DEV.ha_notify, payload, response_topic=reply, correlation_data=correlation)


def test_notify_answers_on_its_response_topic(mqtt_broker: Broker, tiny_voice_dir: Path,
                                              tmp_path: Path) -> None:
    """A notify message with a Response Topic gets its final event there (with the correlation
    data) as well as on the events topic; a refused one is answered there too; a Response
    Topic the command topics may not use is refused the same way, on the events topic alone."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"ha_discovery": True})
    reply = NS.reply("ha-notify")
    forbidden = NS.device("other").command("speak")
    filters = [DEV.events.as_filter(), DEV.status.as_filter(), reply.as_filter(),
               forbidden.as_filter()]
    with running_agent(settings), online_controller(mqtt_broker, filters=filters) as ctl:
        _notify_with_reply(ctl, "Hello with a reply.", reply, b"corr-\x00\xff")
        spoken = ctl.wait_json(reply, lambda e: e["final"], WAIT_S)
        _notify_with_reply(ctl, json.dumps({"id": "ha-r2", "text": "Object."}), reply, b"two")
        ctl.wait_json(reply, lambda e: e["final"] and e["id"] == "ha-r2", WAIT_S)
        _notify_with_reply(ctl, b'["an", "array"]', reply, b"three")
        refused = ctl.wait_json(reply, lambda e: e["event"] == "rejected", WAIT_S)
        _notify_with_reply(ctl, "Not there.", forbidden, b"four")
        bad = ctl.wait_json(DEV.events, lambda e: e["event"] == "rejected"
                            and "response topic" in e["reason"], WAIT_S)
        ctl.publish(DEV.command("ping"), {"id": "after"})
        final_for(ctl, "after", WAIT_S)
        on_reply = [m for m in ctl.messages if m.topic == reply]
        on_forbidden = [m for m in ctl.messages if m.topic == forbidden and m.payload]
        events = ctl.json_on(DEV.events)
    assert spoken["event"] == "finished" and spoken["command"] == "speak", spoken
    kinds = [json.loads(m.payload)["event"] for m in on_reply
             if json.loads(m.payload)["id"] == spoken["id"]]
    assert kinds == ["finished"], kinds  # like a command's: the final event alone
    assert {m.correlation_data for m in on_reply
            if json.loads(m.payload)["id"] == spoken["id"]} == {b"corr-\x00\xff"}
    assert {m.correlation_data for m in on_reply
            if json.loads(m.payload)["id"] == "ha-r2"} == {b"two"}
    assert "a JSON array is not a notify message" in refused["reason"]
    assert [m.correlation_data for m in on_reply
            if json.loads(m.payload)["id"] == refused["id"]] == [b"three"]
    assert "is not allowed" in bad["reason"] and not on_forbidden
    same: dict[str, Any] = next(e for e in events if e["id"] == spoken["id"] and e["final"])
    assert same["event"] == "finished"  # the events topic has them as well
