"""The request journal (issue #14, item 10) on a real file: what an ``accepted`` event finds on
disk, the bounds, a corrupt or torn file, compaction, and the answers after a restart
(:func:`agent.mqtt.recovery.answer_journalled`). The MQTT client is a recorder (wiring only;
tests/integration/test_journal.py kills a real agent process)."""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.audio.item import PRIORITY_HIGH
from agent.daemon.health import journal_section
from agent.mqtt.client import OutboundMessage, Publication
from agent.mqtt.dispatch import Dispatcher
from agent.mqtt.hermes import HermesOrigin
from agent.mqtt.intake import Request
from agent.mqtt.journal import COMPACT_MIN_BYTES, MAX_ENDED_BYTES, RequestJournal
from agent.mqtt.journal_records import parse, read_records
from agent.mqtt.protocol import PingStatus, SpeakCommand
from agent.mqtt.publisher import EventPublisher, ReplyRoute
from agent.mqtt.recovery import answer_journalled
from agent.mqtt.repeats import RECENT_IDS, RECENT_TTL_S
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY_FINISHED, Namespace, Topic
from agent.mqtt.tracker import OpenRefused, RequestTracker
from agent.pipeline.jobs import JobQueue, SpeakJob, SpeakRequest
from agent.settings import Settings

DEV = Namespace("tts").device("d1")
REPLY = ReplyRoute(Topic("ctl/replies"), b"\x00corr\xff")
HERMES = HermesOrigin("say-1", "d1", "s-1")


class Sent:
    """Records what would be published; on each ``accepted`` it reads the journal file as a
    restarted agent would, to see whether the request is already on disk."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.messages: list[OutboundMessage] = []
        self.on_disk_when_accepted: dict[str, bool] = {}

    def publish(self, message: OutboundMessage) -> Publication:
        self.messages.append(message)
        if self.path is not None and message.topic == DEV.events:
            event = json.loads(message.payload)
            if event["event"] == "accepted":
                entries, _, _ = parse(self.path.read_bytes())
                self.on_disk_when_accepted[event["id"]] = event["id"] in entries
        done = threading.Event()
        done.set()
        return Publication(len(self.messages), done)

    def events(self, topic: Topic = DEV.events) -> list[dict[str, Any]]:
        return [json.loads(m.payload) for m in self.messages if m.topic == topic]

    def finals(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for event in self.events():
            if event["final"]:
                out.setdefault(event["id"], []).append(event)
        return out


def journal_at(path: Path, *, replay: bool = False, max_entries: int = 100,
               max_bytes: int = 1 << 20) -> RequestJournal:
    return RequestJournal(path, max_entries=max_entries, max_bytes=max_bytes, keep_speak=replay)


def job(request_id: str, text: str = "Doors closing.", *, deadline: float | None = None,
        priority: int = PRIORITY_HIGH) -> SpeakJob:
    return SpeakJob(request_id, SpeakRequest(text, priority=priority, volume=0.5, speed=1.5),
                    deadline)


def open_request(tracker: RequestTracker, request_id: str, **kwargs: Any) -> bool:
    subject = kwargs.pop("subject", None) or job(request_id)
    return tracker.open(request_id, "speak", subject=subject, **kwargs)


def settings_for(tmp_path: Path, *, replay: bool = False) -> Settings:
    return Settings(device_id="d1", cache={"dir": tmp_path},
                    mqtt={"journal": {"replay": replay}})


def restart(path: Path, *, replay: bool = False, jobs: JobQueue | None = None,
            reply_allowed: Any = None) -> tuple[Sent, JobQueue, RequestJournal]:
    """A new journal and tracker on ``path``, as a restarted agent makes them, answered."""
    sent, jobs = Sent(), jobs or JobQueue(16)
    journal = journal_at(path, replay=replay)
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    answer_journalled(journal, tracker, jobs, settings_for(path.parent, replay=replay),
                      reply_allowed=reply_allowed or (lambda topic: True))
    return sent, jobs, journal


@pytest.fixture()
def path(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "requests.journal"


def test_accepted_leaves_only_once_the_request_is_on_disk(path: Path) -> None:
    sent = Sent(path)
    journal = journal_at(path)
    assert journal.load() == []
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    assert open_request(tracker, "a", reply=REPLY, hermes=HERMES)
    assert open_request(tracker, "b")
    assert sent.on_disk_when_accepted == {"a": True, "b": True}
    entry = parse(path.read_bytes())[0]["a"]
    assert entry.reply == REPLY and entry.hermes == HERMES and entry.command == "speak"
    assert entry.accepted_at <= time.time() and entry.speak is None  # no text without replay
    tracker.finish("a", "finished")
    assert list(parse(path.read_bytes())[0]) == ["b"]
    assert "journaled" not in sent.events()[0]  # said only of a request not on disk


def test_a_crash_leaves_every_request_answered_once_after_the_restart(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    for index in range(30):
        open_request(tracker, f"q-{index}", reply=REPLY if index == 7 else None,
                     hermes=HERMES if index == 8 else None)
    tracker.finish("q-0", "finished")
    # The process dies here: nothing is closed, nothing synced on the way out.
    sent, _, again = restart(path)
    finals = sent.finals()
    assert sorted(finals) == sorted(f"q-{index}" for index in range(1, 30))
    assert all(len(f) == 1 and f[0]["event"] == "failed" and f[0]["reason"] == "agent restarted"
               for f in finals.values())
    reply = [m for m in sent.messages if m.topic == REPLY.topic]
    assert [json.loads(m.payload)["id"] for m in reply] == ["q-7"]
    assert reply[0].correlation_data == REPLY.correlation_data
    assert sent.events(HERMES_ERROR) == [{"error": "agent restarted", "context": "say-1",
                                          "siteId": "d1", "sessionId": "s-1"}]
    assert sent.events(HERMES_SAY_FINISHED)[0]["id"] == "say-1"
    again.close()
    assert restart(path)[0].messages == []  # answered once: nothing left for a third start


def test_replay_queues_what_had_not_begun_and_fails_the_rest(path: Path) -> None:
    journal = journal_at(path, replay=True)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "begun")
    tracker.note("begun", voice="tiny-test")  # the worker took it up
    open_request(tracker, "late", subject=job("late", deadline=time.monotonic() + 0.01))
    open_request(tracker, "queued", reply=REPLY, subject=job("queued", "Mind the gap."))
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:  # "late" passes its deadline
        threading.Event().wait(0.01)
    first = parse(path.read_bytes())[0]["queued"]
    sent, jobs, _ = restart(path, replay=True)
    kept = parse(path.read_bytes())[0]
    assert list(kept) == ["queued"] and kept["queued"].replays == 1
    assert kept["queued"].accepted_at == first.accepted_at and kept["queued"].reply == REPLY
    finals = sent.finals()
    assert finals["begun"][0]["reason"] == ("agent restarted; it had begun, so it is not "
                                            "played again")
    assert finals["late"][0]["reason"] == ("agent restarted; it expired before it could be "
                                           "played")
    assert "queued" not in finals
    replayed = jobs.pop_above(None)
    assert replayed is not None and replayed.request_id == "queued"
    assert replayed.request == SpeakRequest("Mind the gap.", priority=PRIORITY_HIGH, volume=0.5,
                                            speed=1.5)
    accepted = [e for e in sent.events() if e["event"] == "accepted"]
    assert [(e["id"], e["replayed"], e["priority"]) for e in accepted] == [
        ("queued", True, "high")]
    # Killed again before it was played: it was replayed once, so now it fails.
    sent, jobs, _ = restart(path, replay=True)
    assert sent.finals()["queued"][0]["reason"] == ("agent restarted; it was replayed once "
                                                    "already")
    assert [m.correlation_data for m in sent.messages if m.topic == REPLY.topic] == [
        REPLY.correlation_data]
    assert len(jobs) == 0


def test_a_journalled_reply_route_is_checked_again(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "a", reply=REPLY)
    sent, _, _ = restart(path, reply_allowed=lambda topic: False)
    assert sent.finals()["a"][0]["reason"] == "agent restarted"
    assert not [m for m in sent.messages if m.topic == REPLY.topic]


def test_a_full_journal_rejects_before_accepted(path: Path) -> None:
    sent = Sent()
    journal = journal_at(path, max_entries=2)
    journal.load()
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    jobs = JobQueue(16)
    dispatcher = Dispatcher(queue.Queue(), jobs, tracker, _Controls(),
                            voice_names=lambda: ["v"], default_voice="v",
                            status=_status, reload=lambda command: [])
    for index in range(3):
        command = SpeakCommand(id=f"s-{index}", text="Hello.")
        dispatcher.handle(Request(command, "speak", None, None, None, None, time.monotonic()))
    events = [(e["id"], e["event"]) for e in sent.events()]
    assert events == [("s-0", "accepted"), ("s-1", "accepted"), ("s-2", "rejected")]
    assert sent.events()[-1]["reason"] == "busy: request journal full (2 requests, " \
        f"{path.stat().st_size} bytes)"
    assert len(jobs) == 2 and journal.refused == 1
    tracker.finish("s-0", "finished")
    assert open_request(tracker, "s-3")  # room again


def test_the_byte_bound_counts_the_text_kept_for_replay(path: Path) -> None:
    journal = journal_at(path, replay=True, max_bytes=4096)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    assert open_request(tracker, "short")
    with pytest.raises(OpenRefused, match="busy: request journal full"):
        open_request(tracker, "long", subject=job("long", "x" * 5000))
    assert not tracker.is_open("long") and list(parse(path.read_bytes())[0]) == ["short"]


def test_a_write_error_accepts_the_request_unjournaled_until_the_file_is_written(
        path: Path) -> None:
    """#27 item 8 (was: the request rejected, ``cannot journal the request``; one policy now
    for a journal that cannot be written). The file becomes a device whose writes fail with
    ENOSPC (the disk fills up): the request is accepted saying ``journaled: false``, health
    names the path and the error; the next accept writes the file again, with both."""
    sent = Sent()
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    full = path.with_name("full")
    try:
        os.mknod(full, 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # /dev/full's numbers
        fd = os.open(full, os.O_WRONLY | os.O_APPEND)
    except PermissionError:  # in a container the node can be made but not opened (nspawn)
        pytest.skip("cannot make or open a device node here")
    journal._close_fd()
    journal._fd = fd
    os.replace(full, path)  # the open file is the one at the path
    assert open_request(tracker, "a") and tracker.is_open("a")
    assert sent.events()[-1]["event"] == "accepted"
    assert sent.events()[-1]["journaled"] is False
    status = journal_section(journal)
    assert status["state"] == "degraded" and status["unjournaled"] == 1
    assert status["reason"] == f"cannot write {path}: No space left on device"
    assert open_request(tracker, "b")  # the next accept rewrites the file: a regular one
    assert "journaled" not in sent.events()[-1] and path.is_file()
    assert list(parse(path.read_bytes())[0]) == ["a", "b"]
    assert journal_section(journal)["state"] == "ok" and journal_section(journal)["reason"] is None


def test_a_corrupt_journal_is_moved_aside_and_what_it_holds_is_answered(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "before")
    with path.open("ab") as handle:
        handle.write(b'{"op":"open","v":1,"id":"evil","command":"rm -rf"}\n\xff\xfe garbage\n')
        handle.write(b"[" * 5000 + b"\n")  # deeply nested: no RecursionError
    open_request(tracker, "after")
    sent, _, again = restart(path)
    assert sorted(sent.finals()) == ["after", "before"]
    aside = path.with_name("requests.journal.corrupt")
    assert b"garbage" in aside.read_bytes()
    assert again.active and parse(path.read_bytes())[0] == {}


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_a_journal_that_is_not_a_file_is_moved_aside(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True)
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # never opened for reading in a way that could block
    else:
        path.symlink_to(path.parent / "elsewhere")
    journal = journal_at(path)
    assert journal.load() == [] and journal.active
    assert path.is_file() and not path.is_symlink()
    assert os.path.lexists(path.with_name("requests.journal.corrupt"))


def test_a_journal_that_cannot_be_opened_is_switched_off(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the directory should be", encoding="utf-8")
    path = tmp_path / "cache" / "requests.journal"
    journal = journal_at(path)
    assert journal.load() == [] and not journal.active
    sent = Sent()
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    assert open_request(tracker, "a")  # served, without the journal
    # #27 item 8: ...and the loss stated, in the accepted event and in health, until fixed.
    assert sent.events()[-1]["event"] == "accepted" and sent.events()[-1]["journaled"] is False
    status = journal_section(journal)
    assert status["state"] == "degraded" and status["reason"] == f"cannot write {path}: File exists"
    assert open_request(tracker, "b") and sent.events()[-1]["journaled"] is False
    (tmp_path / "cache").unlink()  # fixed: the next accept makes the directory and the file
    assert open_request(tracker, "c") and "journaled" not in sent.events()[-1]
    assert journal.active and journal_section(journal)["state"] == "ok"
    assert journal_section(journal)["unjournaled"] == 2
    assert list(parse(path.read_bytes())[0]) == ["a", "b", "c"]  # kept in memory meanwhile
    journal.close()


def test_a_directory_that_cannot_be_moved_aside_is_stated_until_it_is_gone(path: Path) -> None:
    """#27 item 8: the directory at the path cannot be moved aside (an older non-empty
    ``.corrupt`` is in the way): degraded with the path until the directory is removed."""
    path.mkdir(parents=True)
    (path / "x").write_bytes(b"")
    aside = path.with_name("requests.journal.corrupt")
    aside.mkdir()
    (aside / "y").write_bytes(b"")
    journal = journal_at(path)
    assert journal.load() == [] and not journal.active
    reason = journal_section(journal)["reason"]
    assert reason is not None and reason.startswith(f"cannot write {path}: not a regular file")
    sent = Sent()
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    assert open_request(tracker, "a") and sent.events()[-1]["journaled"] is False
    assert journal_section(journal)["reason"] == f"cannot write {path}: Is a directory"
    (path / "x").unlink()
    path.rmdir()
    assert open_request(tracker, "b") and "journaled" not in sent.events()[-1]
    assert journal_section(journal)["state"] == "ok" and journal_section(journal)["reason"] is None
    assert list(parse(path.read_bytes())[0]) == ["a", "b"]


def test_a_file_cut_anywhere_is_read_without_error(path: Path) -> None:
    """A crash can cut the last write at any byte: what is read is then the requests whose
    ``open`` record was complete, never a corrupt journal."""
    journal = journal_at(path, replay=True)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "a", reply=REPLY, hermes=HERMES)
    open_request(tracker, "b", subject=job("b", "Zürich — «quoted» \\ \"text\"."))
    tracker.note("b", voice="v")
    tracker.finish("a", "finished")
    data = path.read_bytes()
    seen = []
    for cut in range(len(data) + 1):
        entries, bad, _ = parse(data[:cut])
        assert bad == 0, cut
        seen.append(tuple(entries))
    assert seen[-1] == ("b",) and {("a",), ("a", "b"), ("b",), ()} >= set(seen)
    assert parse(data)[0]["b"].begun and parse(data)[0]["b"].speak is not None


def test_a_torn_tail_is_not_corruption(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "whole")
    with path.open("ab") as handle:
        handle.write(b'{"op":"open","v":1,"id":"cut-off","comm')
    sent, _, _ = restart(path)
    assert list(sent.finals()) == ["whole"]
    assert not path.with_name("requests.journal.corrupt").exists()


def test_the_file_stays_small_under_a_steady_load(path: Path) -> None:
    journal = journal_at(path, replay=True)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "long-lived", subject=job("long-lived", "y" * 2000))
    largest = 0
    for index in range(400):  # several times COMPACT_MIN_BYTES of records in all
        open_request(tracker, f"r-{index}", subject=job(f"r-{index}", "z" * 400))
        tracker.note(f"r-{index}", voice="v")
        tracker.finish(f"r-{index}", "finished")
        largest = max(largest, path.stat().st_size)
    assert largest <= COMPACT_MIN_BYTES + 4096
    assert list(parse(path.read_bytes())[0]) == ["long-lived"]
    tracker.finish("long-lived", "finished")
    journal.close()
    # Was "emptied on the way out" (st_size == 0): the file now also keeps the outcomes of the
    # requests that ended in the repeat window (#14), so it holds no unfinished request only.
    assert parse(path.read_bytes())[0] == {}


class _Controls:
    def stop(self, flush: bool = False) -> object:
        return None

    def set_volume(self, volume: float) -> None:
        pass


def _status() -> PingStatus:
    return PingStatus(state="online", version="0", uptime_s=0.0, voices=[], default_voice="v",
                      pending=0, volume=1.0, mqtt_reconnects=0)


def test_marks_written_after_the_last_open_never_push_the_file_past_what_is_read(
        path: Path) -> None:
    """Review of #14: ``begun`` and ``close`` marks are appended without the compaction check
    an ``open`` gets, so a journal near twice its live size that then sees many requests begin
    and end outgrew what :meth:`RequestJournal.load` reads (``2 * max_bytes`` plus
    :data:`COMPACT_MIN_BYTES`). The marks past that were lost on the restart: requests that
    had been played and answered were replayed (spoken twice) or answered a second time."""
    max_bytes = 400_000
    journal = journal_at(path, replay=True, max_entries=2000, max_bytes=max_bytes)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    ids = [f"{'x' * 120}-{index:05d}" for index in range(1023)]
    for request_id in ids:
        open_request(tracker, request_id, subject=job(request_id, "Mind the gap, please."))
    live = path.stat().st_size
    churn = 0
    while path.stat().st_size < 2 * live - 4096:  # grow it to just below its compaction point
        churn_id = f"churn-{churn}"
        open_request(tracker, churn_id, subject=job(churn_id, "Mind the gap, please."))
        tracker.finish(churn_id, "finished")
        churn += 1
    for request_id in ids[:1000]:  # played and answered: marked begun, then closed
        tracker.note(request_id, voice="v")
        tracker.finish(request_id, "finished")
    assert path.stat().st_size <= 2 * max_bytes + COMPACT_MIN_BYTES
    # The process dies here; the restart's speak queue takes every replay.
    sent, jobs = Sent(), JobQueue(2048)
    again = journal_at(path, replay=True, max_entries=2000, max_bytes=max_bytes)
    answer_journalled(again, RequestTracker(EventPublisher(sent, DEV), observer=again), jobs,
                      settings_for(path.parent, replay=True), reply_allowed=lambda topic: True)
    assert not path.with_name("requests.journal.corrupt").exists()
    replayed = [jobs.pop_above(None) for _ in range(len(jobs))]
    assert sorted(j.request_id for j in replayed if j is not None) == ids[1000:]
    assert [e["id"] for e in sent.events() if e["event"] == "accepted"] == ids[1000:]
    assert sent.finals() == {}


# -- outcomes of ended requests survive a restart (#14: nothing spoken twice) ------------------


def restarted_tracker(path: Path) -> tuple[Sent, RequestTracker, RequestJournal]:
    """What a restarted agent has after :func:`answer_journalled`: its tracker and journal."""
    sent, journal = Sent(), journal_at(path)
    tracker = RequestTracker(EventPublisher(sent, DEV), observer=journal)
    answer_journalled(journal, tracker, JobQueue(16), settings_for(path.parent),
                      reply_allowed=lambda topic: True)
    return sent, tracker, journal


def duplicate_of(sent: Sent, tracker: RequestTracker, request_id: str) -> dict[str, Any] | None:
    """Admit a repeat of ``request_id``: its final ``duplicate``, or None if served as new."""
    if tracker.admit(request_id, "speak"):
        return None
    return sent.finals()[request_id][-1]


def test_an_ended_requests_outcome_survives_a_restart(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "done")
    tracker.finish("done", "finished")
    open_request(tracker, "broke")
    tracker.finish("broke", "failed", reason="synthesis failed")
    open_request(tracker, "unfinished")
    # The process is killed here (nothing closed); a restart, then a second one.
    sent, again, _ = restarted_tracker(path)
    assert list(sent.finals()) == ["unfinished"]  # answered failed, as before
    done = duplicate_of(sent, again, "done")
    assert done is not None and done["event"] == "duplicate" and done["outcome"] == "finished"
    broke = duplicate_of(sent, again, "broke")
    assert broke is not None and broke["outcome"] == "failed"
    assert broke["reason"] == "synthesis failed"
    assert again.admit("never-seen", "speak")  # a new id is still served
    sent, third, _ = restarted_tracker(path)
    assert sent.finals() == {}  # nothing left to answer...
    unfinished = duplicate_of(sent, third, "unfinished")  # ...and the restart's answer is kept
    assert unfinished is not None and unfinished["outcome"] == "failed"
    assert unfinished["reason"] == "agent restarted"


def test_compaction_keeps_only_outcomes_inside_the_window(path: Path) -> None:
    now = time.time()
    old = [json.dumps({"op": "close", "id": f"old-{i}", "event": "finished",
                       "at": now - RECENT_TTL_S - 60}) for i in range(3)]
    recent = [json.dumps({"op": "close", "id": f"new-{i}", "event": "finished", "at": now})
              for i in range(RECENT_IDS + 4)]
    path.parent.mkdir(parents=True)
    path.write_text("\n".join([*old, *recent]) + "\n")
    journal = journal_at(path)
    journal.load()  # the load compacts the file
    kept = [f"new-{i}" for i in range(4, RECENT_IDS + 4)]  # the newest RECENT_IDS only
    assert [ended.request_id for ended in journal.recent_outcomes()] == kept
    assert list(read_records(path.read_bytes()).ended) == kept
    sent, tracker, _ = restarted_tracker(path)
    assert tracker.admit("old-0", "speak") and tracker.admit("new-0", "speak")
    assert duplicate_of(sent, tracker, "new-4") is not None


def test_outcomes_past_the_window_are_dropped_when_the_file_is_compacted(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "stale")
    tracker.finish("stale", "finished")
    stale = journal._ended.values(time.time())[0]
    journal._ended.keep(dataclasses.replace(stale, ended_at=time.time() - RECENT_TTL_S - 1))
    for index in range(2000):  # enough closes to compact the file
        open_request(tracker, f"r-{index}")
        tracker.finish(f"r-{index}", "finished")
    ended = read_records(path.read_bytes()).ended
    assert "stale" not in ended and "r-1999" in ended
    assert path.stat().st_size <= 2 * MAX_ENDED_BYTES + COMPACT_MIN_BYTES


def test_a_torn_outcome_record_is_tolerated(path: Path) -> None:
    journal = journal_at(path)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    open_request(tracker, "done")
    tracker.finish("done", "finished")
    open_request(tracker, "cut")
    with path.open("ab") as handle:  # the crash cut the close record of "cut"
        handle.write(b'{"op":"close","id":"cut","event":"fini')
    sent, again, _ = restarted_tracker(path)
    assert not path.with_name("requests.journal.corrupt").exists()
    assert [e["event"] for e in sent.finals()["cut"]] == ["failed"]  # unfinished on disk
    done = duplicate_of(sent, again, "done")
    assert done is not None and done["outcome"] == "finished"


def test_a_replayed_request_keeps_its_chime(path: Path) -> None:
    journal = journal_at(path, replay=True)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    chimed = SpeakJob("chimed", SpeakRequest("Doors closing.", chime="ding"), None)
    open_request(tracker, "chimed", subject=chimed)
    _, jobs, _ = restart(path, replay=True)
    replayed = jobs.pop_above(None)
    assert replayed is not None and replayed.request.chime == "ding"


def test_a_replayed_request_keeps_its_synchronized_start(path: Path) -> None:
    # After a crash the start is past: the replay keeps it, so the player joins late at the
    # sample due or does not play (audio.sync_late); it never plays from the beginning late.
    journal = journal_at(path, replay=True)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    at = time.time() - 3.0
    synced = SpeakJob("synced", SpeakRequest("Doors closing.", start_at=at), None)
    open_request(tracker, "synced", subject=synced)
    plain = SpeakJob("plain", SpeakRequest("Mind the gap."), None)
    open_request(tracker, "plain", subject=plain)
    _, jobs, _ = restart(path, replay=True)
    replayed = {job.request_id: job for job in (jobs.pop_above(None), jobs.pop_above(None))
                if job is not None}
    assert replayed["synced"].request.start_at == pytest.approx(at, abs=1e-3)
    assert replayed["plain"].request.start_at is None
