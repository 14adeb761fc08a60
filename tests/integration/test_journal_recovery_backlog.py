"""Review of #14 item 10: a full journal is answered after a restart, however many requests it
holds. The finals are published before the MQTT client has connected, so they wait in paho's
queue of outgoing QoS 1 messages, which :func:`agent.mqtt.connect.queue_limit` sizes for a full
journal (with a Response Topic each request needs two of them). Real Mosquitto, in-process
agent, tiny voice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.mqtt.journal import RequestJournal
from agent.mqtt.journal_records import JournalEntry, parse
from agent.mqtt.publisher import ReplyRoute
from agent.mqtt.topics import Namespace, Topic
from tests.support.broker import Broker, Recorder, agent_settings, running_agent

pytestmark = [pytest.mark.broker]

DEV = Namespace("tts").device("t1")
REPLIES = Topic("ctl/replies/t1")
LEFT = 1000
"""Requests an earlier run left in the journal (the default mqtt.journal.max_entries is 1024)."""
WAIT_S = 30.0  # generous bound for the last final once the agent runs; never asserted


def test_every_journalled_request_is_answered_even_past_the_client_queue(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    journal = RequestJournal.for_settings(settings).path  # <cache.dir>/devices/t1/
    journal.parent.mkdir(parents=True, exist_ok=True)
    ids = [f"left-{index}" for index in range(LEFT)]
    journal.write_bytes(b"".join(
        JournalEntry(request_id, "speak", time.time(), None,
                     ReplyRoute(REPLIES, request_id.encode()), None, None).record()
        for request_id in ids))
    with Recorder(mqtt_broker.settings(), [DEV.events.as_filter(), REPLIES.as_filter()],
                  "journal-backlog") as rec, running_agent(settings):
        rec.wait_json(DEV.events, lambda e: e["id"] == ids[-1] and e["final"], WAIT_S)
        # The reply to the Response Topic goes out after the event: wait for the last one too.
        rec.wait_json(REPLIES, lambda e: e["id"] == ids[-1], WAIT_S)
        finals = [e for e in rec.json_on(DEV.events) if e["final"] and e["id"] in ids]
        replies = rec.json_on(REPLIES)
    assert sorted(e["id"] for e in finals) == sorted(ids)
    assert all(e["event"] == "failed" and e["reason"] == "agent restarted" for e in finals)
    assert sorted(e["id"] for e in replies) == sorted(ids)
    # Was "the file is empty" (json.loads(... or b"null") is None): the journal now also keeps
    # the outcomes of the requests answered, for the repeat window (#14); none is unfinished.
    assert parse(journal.read_bytes())[0] == {}  # nothing left unanswered
