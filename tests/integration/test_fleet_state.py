"""One device's state is its own (#28 item 7): agents started side by side from one checkout,
as real daemon processes on one ``cache.dir`` with different device ids, over a real Mosquitto
and ALSA file PCMs.

- Each keeps its request journal in ``<cache.dir>/devices/<device_id>/``; an older agent's
  journal at ``<cache.dir>/requests.journal`` is taken over by the first agent to start, and
  what it left unfinished is answered (not lost).
- The issue's case: ``a`` is killed, a group speak reaches ``b`` (finished) and waits in
  ``a``'s persistent session; after its restart ``a`` plays it. With one shared journal ``a``
  read ``b``'s outcome and answered ``duplicate`` ``outcome finished`` for speech it never
  played.
- With Home Assistant discovery on, each keeps its own discovery message (one marker file per
  device: with one shared file, ``b``'s start removed ``a``'s message).
- A third agent with ``b``'s device id on the same ``cache.dir`` refuses to start: one line
  naming the device and the pid that hold the state, exit 4.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agent.commands import CONFLICT
from agent.mqtt.journal import JOURNAL_NAME
from agent.mqtt.journal_records import JournalEntry
from agent.mqtt.topics import DiscoveryTopics, Namespace
from agent.settings import Settings
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, daemon

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
WAIT_S = 90.0  # generous upper bound on a daemon start on a loaded machine; never asserted


def member(broker: Broker, models: Path, work: Path, cache: Path, device: str) -> Settings:
    """A lobby member whose ``cache.dir`` is the one all of them share (as from one checkout)."""
    settings = agent_settings(broker, models, work / device, device_id=device,
                              mqtt={"groups": ["lobby"], "ha_discovery": True})
    return settings.model_copy(update={"cache": settings.cache.model_copy(update={"dir": cache})})


def online(rec: Recorder, device: str, after: float) -> None:
    rec.wait_json(NS.device(device).status,
                  lambda p: p.get("state") == "online" and p.get("ts", after) >= after, WAIT_S)


def finals(rec: Recorder, device: str, request_id: str) -> list[dict[str, Any]]:
    return [e for e in rec.json_on(NS.device(device).events)
            if e.get("id") == request_id and e.get("final")]


def test_agents_on_one_cache_dir_keep_their_own_journals(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    a, b = (member(mqtt_broker, tiny_voice_dir.parent, tmp_path, cache, d) for d in "ab")
    legacy = cache / JOURNAL_NAME  # where an older agent kept the one journal
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(JournalEntry("old-1", "speak", time.time(), None, None, None,
                                    None).record())
    ha = {d: DiscoveryTopics("homeassistant", d).config for d in "ab"}
    filters = [NS.all_events(), NS.all_status(), *(t.as_filter() for t in ha.values())]
    with Recorder(mqtt_broker.settings(), filters, "fleet-state") as rec, ExitStack() as stack:
        start = time.time()
        first_a = stack.enter_context(daemon(a, tmp_path / "a.log"))
        online(rec, "a", start)
        assert rec.wait_json(NS.device("a").events, lambda e: e["id"] == "old-1"
                             and e["final"], WAIT_S)["reason"] == "agent restarted"
        stack.enter_context(daemon(b, tmp_path / "b.log"))
        online(rec, "b", start)
        os.kill(first_a.pid, signal.SIGKILL)
        first_a.wait(30)
        rec.publish(NS.group_command("lobby", "speak"),
                    {"id": "g-1", "text": "The lobby closes in ten minutes."})
        assert rec.wait_json(NS.device("b").events, lambda e: e["id"] == "g-1"
                             and e["final"], WAIT_S)["event"] == "finished"
        stack.enter_context(daemon(a, tmp_path / "a2.log"))  # its session kept the group speak
        answer = rec.wait_json(NS.device("a").events, lambda e: e["id"] == "g-1"
                               and e["final"], WAIT_S)
        assert answer["event"] == "finished", answer  # was: duplicate, outcome finished
        twin = subprocess.run([sys.executable, "-m", "agent", "run"], env=agent_env(b), check=False,
                              capture_output=True, text=True, timeout=WAIT_S)
        for device in "ab":  # both discovery messages published, and still retained
            rec.wait_for(lambda m, t=ha[device]: m.topic == t and bool(m.payload), WAIT_S)
    with Recorder(mqtt_broker.settings(), [t.as_filter() for t in ha.values()],
                  "ha-retained") as late:
        for device in "ab":  # was: b's start removed a's, which shared one marker file
            late.wait_for(lambda m, t=ha[device]: m.topic == t and bool(m.payload), WAIT_S)
    assert not legacy.exists()
    for device in "ab":
        assert (cache / "devices" / device / JOURNAL_NAME).is_file()
    assert [e["event"] for e in finals(rec, "b", "old-1")] == []  # a took the old journal
    assert twin.returncode == CONFLICT, twin.stderr
    lines = twin.stderr.strip().splitlines()
    assert len(lines) == 1, twin.stderr
    assert "the state of device b" in lines[0] and "in use by another agent (device 'b', pid " \
        in lines[0] and "own device_id" in lines[0], lines[0]
