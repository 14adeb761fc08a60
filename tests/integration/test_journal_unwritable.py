"""#27 item 8: a request journal that cannot be written is stated, never silently ignored.
The agent as a process, a real Mosquitto, the stall voice (its first request never leaves
synthesis, so the others stay open), SIGKILL.

Was: with a directory where the journal file should be, speaks were accepted as if journalled
(no ``journaled`` in ``accepted``), health said ``ok``, and after a SIGKILL the restart moved
the directory aside and none of them was ever answered. Now ``accepted`` says
``journaled: false``, health is ``degraded`` naming the path and the error; once the directory
is gone the next accept writes the file again (with the requests accepted meanwhile), health
is ``ok`` again, and the restart answers every one of them.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.journal import JOURNAL_NAME, RequestJournal
from agent.mqtt.topics import Namespace
from agent.settings import Settings
from tests.support import stall_voice
from tests.support.broker import Broker, Recorder, agent_settings, daemon

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
WAIT_S = 90.0  # generous upper bound on a daemon start on a loaded machine; never asserted


@pytest.fixture()
def rec(mqtt_broker: Broker) -> Iterator[Recorder]:
    filters = [DEV.events.as_filter(), DEV.status.as_filter(), DEV.health.as_filter()]
    with Recorder(mqtt_broker.settings(), filters, "controller") as recorder:
        yield recorder


def settings_for(broker: Broker, tmp_path: Path, **journal: Any) -> Settings:
    models = tmp_path / "models"
    stall_voice.build_bundle(models)
    return agent_settings(broker, models, tmp_path / "agent", voice=stall_voice.VOICE,
                          mqtt={"journal": journal} if journal else None)


def wait_online(rec: Recorder, times: int) -> None:
    def enough(_: Any) -> bool:
        return sum(p.get("state") == "online" for p in rec.json_on(DEV.status)) >= times
    rec.wait_for(lambda m: m.topic == DEV.status and enough(m), WAIT_S)


def accepted(rec: Recorder, request_id: str) -> dict[str, Any]:
    return rec.wait_json(DEV.events, lambda e: (
        e["id"] == request_id and e["event"] in ("accepted", "rejected")), WAIT_S)


def speak(rec: Recorder, request_id: str, **fields: Any) -> dict[str, Any]:
    rec.publish(DEV.command("speak"), {"id": request_id, "text": "Doors closing.", **fields})
    return accepted(rec, request_id)


def health_after_ping(rec: Recorder, ping_id: str) -> dict[str, Any]:
    """The health report the agent publishes right after answering ``ping_id``."""
    seen = len(rec.json_on(DEV.health))
    rec.publish(DEV.command("ping"), {"id": ping_id})
    rec.wait_json(DEV.events, lambda e: e["id"] == ping_id and e["final"], WAIT_S)
    rec.wait_for(lambda m: m.topic == DEV.health and len(rec.json_on(DEV.health)) > seen,
                 WAIT_S)
    return rec.json_on(DEV.health)[-1]


def finals_for(rec: Recorder, request_id: str) -> list[dict[str, Any]]:
    return [e for e in rec.json_on(DEV.events) if e.get("id") == request_id and e["final"]]


def test_a_directory_where_the_journal_should_be_is_stated_and_recovered_from(
        mqtt_broker: Broker, rec: Recorder, tmp_path: Path) -> None:
    settings = settings_for(mqtt_broker, tmp_path)
    path = RequestJournal.for_settings(settings).path  # <cache.dir>/devices/t1/
    with daemon(settings, tmp_path / "first.log") as agent:
        wait_online(rec, 1)
        hang = speak(rec, "hang", speed=stall_voice.HANG_SPEED)  # holds synthesis for good
        assert hang["event"] == "accepted" and "journaled" not in hang
        ok = health_after_ping(rec, "p-0")
        assert ok["journal"]["state"] == "ok" and ok["journal"]["path"] == str(path)
        path.unlink()  # a directory now stands where the journal file should be
        path.mkdir()
        (path / "something").write_bytes(b"")
        lost = [speak(rec, f"lost-{index}") for index in range(3)]
        assert [e["event"] for e in lost] == ["accepted"] * 3  # served all the same...
        assert [e.get("journaled") for e in lost] == [False] * 3  # ...the loss stated
        bad = health_after_ping(rec, "p-1")
        reason = f"cannot write {path}: Is a directory"
        assert bad["state"] == "degraded", bad["reasons"]
        assert f"request journal not written: {reason}" in bad["reasons"]
        assert bad["journal"]["state"] == "degraded" and bad["journal"]["reason"] == reason
        assert bad["journal"]["unjournaled"] == 3 and not bad["journal"]["writable"]
        shutil.rmtree(path)  # fixed: the next accept writes the journal again
        kept = speak(rec, "kept")
        assert kept["event"] == "accepted" and "journaled" not in kept
        again = health_after_ping(rec, "p-2")
        assert again["journal"]["state"] == "ok" and again["journal"]["writable"]
        assert not any(r.startswith("request journal") for r in again["reasons"])
        assert path.is_file()
        agent.send_signal(signal.SIGKILL)
        assert agent.wait(30) == -signal.SIGKILL
    ids = ["hang", "lost-0", "lost-1", "lost-2", "kept"]
    assert not any(finals_for(rec, request_id) for request_id in ids)
    with daemon(settings, tmp_path / "second.log") as agent:
        wait_online(rec, 2)
        for request_id in ids:  # the rewrite kept what was accepted while it was broken
            rec.wait_json(DEV.events, lambda e, rid=request_id: e["id"] == rid and e["final"],
                          WAIT_S)
        finals = [finals_for(rec, request_id) for request_id in ids]
        assert [[(e["event"], e["reason"]) for e in f] for f in finals] == [
            [("failed", "agent restarted")]] * len(ids)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0


def test_a_journal_whose_directory_is_a_file_is_stated_until_it_can_be_made(
        mqtt_broker: Broker, rec: Recorder, tmp_path: Path) -> None:
    """``mqtt.journal.file`` under a path whose parent is a file: the agent starts and serves,
    saying so; once the file is gone the next accept makes the directory and the journal."""
    blocker = tmp_path / "state"
    blocker.write_bytes(b"a file where the journal's directory should be")
    path = blocker / JOURNAL_NAME
    settings = settings_for(mqtt_broker, tmp_path, file=str(path))
    with daemon(settings, tmp_path / "first.log") as agent:
        wait_online(rec, 1)
        hang = speak(rec, "hang", speed=stall_voice.HANG_SPEED)
        assert hang["event"] == "accepted" and hang["journaled"] is False
        bad = health_after_ping(rec, "p-0")
        assert bad["state"] == "degraded" and bad["journal"]["path"] == str(path)
        assert bad["journal"]["reason"] == f"cannot write {path}: File exists"
        blocker.unlink()
        kept = speak(rec, "kept")
        assert kept["event"] == "accepted" and "journaled" not in kept
        again = health_after_ping(rec, "p-1")
        assert again["journal"]["state"] == "ok" and path.is_file()
        agent.send_signal(signal.SIGKILL)
        assert agent.wait(30) == -signal.SIGKILL
    with daemon(settings, tmp_path / "second.log") as agent:
        wait_online(rec, 2)
        for request_id in ("hang", "kept"):
            final = rec.wait_json(DEV.events, lambda e, rid=request_id: (
                e["id"] == rid and e["final"]), WAIT_S)
            assert (final["event"], final["reason"]) == ("failed", "agent restarted")
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
