"""The fleet view's bookkeeping (#18): states, forgetting, bounds; the account's summary.
(The same over a real broker: tests/integration/test_fleet.py.)"""

from __future__ import annotations

import json
import time
from typing import Any

from agent.commands.fleet import fit
from agent.commands.send_account import Account, Inbox, summary
from agent.mqtt.client import InboundMessage
from agent.mqtt.fleet_view import FleetView
from agent.mqtt.topics import Namespace, Topic

NS = Namespace("tts")
NOW = 1_800_000_000.0


def message(topic: str, payload: bytes | dict[str, Any]) -> InboundMessage:
    data = json.dumps(payload).encode() if isinstance(payload, dict) else payload
    return InboundMessage(Topic(topic), data, True, False, None, None, None, time.monotonic())


def health(at: float, state: str = "ok", reasons: tuple[str, ...] = ()) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(at))
    return {"state": state, "reasons": list(reasons), "version": "1.2", "time": stamp,
            "queue": {"depth": 2, "max": 16, "pending": 3, "intake": 0},
            "voices": {"default": "joe", "voices": [], "last_reload": {}}}


def test_states_from_status_and_health_age() -> None:
    view = FleetView(NS, default_interval_s=10)
    view.offer(message("tts/a/status", {"state": "online", "device": "a", "groups": ["x"],
                                        "health_interval_s": 60}))
    view.offer(message("tts/a/health", health(NOW - 150)))  # 2.5 of its own 60 s intervals
    view.offer(message("tts/b/status", {"state": "online", "device": "b"}))
    view.offer(message("tts/b/health", health(NOW - 31, "degraded", ("audio: gone",))))
    view.offer(message("tts/c/health", health(NOW)))
    rows = {r.device: r for r in view.rows(now=NOW)}
    assert rows["a"].state == "online" and rows["a"].health_age_s == 150.0
    assert rows["b"].state == "silent"  # 3 x the default 10 s
    assert rows["b"].last_error == "audio: gone" and rows["a"].last_error is None
    assert rows["c"].state == "unknown"
    assert (rows["a"].voice, rows["a"].version, rows["a"].queue, rows["a"].pending) == (
        "joe", "1.2", 2, 3)


def test_the_last_will_keeps_the_groups_and_an_empty_message_forgets() -> None:
    view = FleetView(NS)
    view.offer(message("tts/a/status", {"state": "online", "device": "a", "groups": ["x"]}))
    view.offer(message("tts/a/status", {"state": "offline", "device": "a"}))
    assert view.rows(now=NOW)[0].state == "offline" and view.rows(now=NOW)[0].groups == ("x",)
    assert view.members("x") == set() and view.known_members("x") == {"a": "offline"}
    view.offer(message("tts/a/status", b""))
    assert len(view) == 0


def test_bounds_and_refusals_are_counted() -> None:
    view = FleetView(NS, max_devices=2, max_message_bytes=1000)
    for device in ("a", "b", "c", "d"):
        view.offer(message(f"tts/{device}/status", {"state": "online", "device": device}))
    view.offer(message("tts/e/health", b"[" + b" " * 2000 + b"]"))
    view.offer(message("tts/a/health", b"[1, 2]"))
    view.offer(message("tts/reply/status", {"state": "online"}))  # a reserved level
    assert not view.offer(message("tts/a/events", {"id": "x"}))  # not the view's
    assert len(view) == 2
    assert view.counts() == {"over_cap": 2, "oversize": 1, "invalid": 2}


def test_the_summary_names_who_failed_and_who_did_not_answer() -> None:
    account = Account({"a", "b", *(f"s{i:02d}" for i in range(60))}, timeout=5)
    account.finals["a"] = {"event": "finished"}
    account.finals["b"] = {"event": "rejected", "reason": "unknown voice 'x'"}
    account.extra["z"] = {"event": "finished"}
    account.lost["s00"] = "offline"
    account.silent_when_sent = {"s01"}
    lines = summary(account, "lobby", {"q": "stopped"})
    assert lines[0] == ("group lobby: 62 expected (online), 2 answered: 1 succeeded, 1 failed, "
                        "60 no answer within 5 s; 1 extra")
    assert lines[1] == "failed: b (rejected: unknown voice 'x')"
    assert lines[2].startswith("no answer: s00 (went offline), s01 (silent when sent), s02, ")
    assert lines[2].endswith(", s49 and 10 more")
    assert lines[3] == "extra (not online in the retained status when sent): z (finished)"
    assert lines[4] == "not online when sent: q (stopped)"
    assert account.status() == 3


def test_events_past_the_inbox_are_counted() -> None:
    inbox = Inbox(maxsize=2)
    for index in range(5):
        inbox.offer(message(f"tts/d{index}/events", {"id": "x"}))
    assert inbox.qsize() == 2 and inbox.dropped == 3


def test_the_watch_table_fits_the_terminal() -> None:
    lines = ["HEADER", *(f"d{i}" for i in range(30))]
    assert fit(lines, 40) == lines
    cut = fit(lines, 10)
    assert len(cut) == 9 and cut[0] == "HEADER" and cut[-1].startswith("... 23 more")


def pong(device: str, request_id: str = "probe-1", **status: Any) -> dict[str, Any]:
    return {"event": "pong", "final": True, "id": request_id, "device": device,
            "status": {"state": "online", "version": "1.3", "default_voice": "amy",
                       "pending": 1, "groups": ["lobby"],
                       "health": {"state": "degraded", "reasons": ["audio: slow"]}, **status}}


def test_the_probe_takes_its_own_pongs_and_the_retained_state_wins() -> None:
    view = FleetView(NS, max_devices=3)
    view.offer(message("tts/a/status", {"state": "stopped", "device": "a", "groups": ["hall"]}))
    assert not view.offer(message("tts/b/events", pong("b")))  # no probe yet: the caller's
    view.probe("probe-1")
    assert view.offer(message("tts/a/events", pong("a")))
    assert view.offer(message("tts/b/events", pong("b")))
    rows = {r.device: r for r in view.rows()}
    assert (rows["a"].state, rows["a"].groups) == ("stopped", ("hall",))  # retained wins
    assert (rows["b"].state, rows["b"].groups, rows["b"].voice, rows["b"].version) == (
        "online", ("lobby",), "amy", "1.3")
    assert (rows["b"].health, rows["b"].last_error, rows["b"].pending) == (
        "degraded", "audio: slow", 1)
    assert view.members("lobby") == {"b"} and view.answered == 2
    # not an answer to this probe: left to the caller, never taken for a device
    for topic, payload in (("tts/c/events", pong("c", "other")),   # another request's pong
                           ("tts/c/events", pong("d")),            # names another device
                           ("tts/c/events", b'{"event": "pong"'),  # not JSON
                           ("tts/c/events", {"event": "finished", "id": "probe-1"}),
                           ("tts/c/events", b'"pong"' + b" " * 200_000)):  # too large
        assert not view.offer(message(topic, payload)), payload
    assert len(view) == 2 and view.answered == 2
    view.offer(message("tts/b/status", {"state": "offline", "device": "b"}))
    assert view.rows()[1].state == "offline"  # a later retained or live status still wins
    for device in ("c", "d"):
        view.offer(message(f"tts/{device}/events", pong(device)))
    assert len(view) == 3 and view.over_cap == 1  # the device cap holds for answers too


def test_a_read_cut_off_or_past_the_cap_makes_the_view_incomplete() -> None:
    """#27 item 10: ``settle`` tells a read stopped at its limit; the account exits 3."""
    from agent.commands.send_account import incomplete

    view = FleetView(NS, max_devices=1)
    assert view.settle(0.01, longest_s=5) and view.complete and incomplete(view) is None
    assert not view.settle(5, longest_s=0.05)  # no quiet of 5 s within 0.05 s
    assert not view.complete and view.cut_off_s == 0.05
    for device in ("a", "b"):
        view.offer(message(f"tts/{device}/status", {"state": "online", "device": device}))
    why = incomplete(view)
    assert view.read == 2 and why == (
        "the retained read was cut off at 0.05 s (--read-limit) after 2 messages, before a "
        "quiet --settle; 1 messages about devices past the cap of 1 were not kept")
    account = Account({"a"}, timeout=5, incomplete=why)
    account.finals["a"] = {"event": "finished"}
    assert account.status() == 3
    assert summary(account, "lobby", {})[-1].startswith("membership incomplete: the retained")


def test_a_member_back_online_is_waited_for_and_counted() -> None:
    """#27 item 11: a member not online when sent that comes back answers as a member."""
    account = Account({"a"}, timeout=5, not_online={"b": "offline", "c": "stopped"})
    account.start(0.0)
    account.finals["a"] = {"event": "finished"}
    assert account.open(1.0) == set()
    account.come_back("b", 1.0)
    assert account.open(1.0) == {"b"} and account.open(7.0) == set()
    assert account.member("b") and not account.member("z")
    account.finals["b"] = {"event": "finished"}
    lines = summary(account, "lobby", account.absent())
    assert lines[0].startswith("group lobby: 1 expected (online) + 1 back online, 2 answered: "
                               "2 succeeded, 0 failed, 0 no answer")
    assert "answered after not online when sent: b (offline when sent; finished)" in lines
    assert lines[-1] == "not online when sent: c (stopped)"
    assert account.status() == 0  # c was stopped cleanly: named, not failed (#28 item 8)
    account.not_online["d"] = "offline"  # its Last Will: it did not finish
    assert account.missing() == ["d"] and account.status() == 3
    account.online_only = True
    assert account.status() == 0


def test_deep_or_huge_retained_json_is_counted_not_a_crash() -> None:
    """#27: any client may publish a retained status or health; JSON nested 1,000 deep (a
    RecursionError for ``send --wait`` before) or a 5,000-digit number is "not the agent's JSON"
    (bounded: agent.jsonbound), and what the device said before is kept."""
    from agent.commands.send_wait import event_for

    view = FleetView(NS)
    view.offer(message("tts/a/status", {"state": "online", "device": "a"}))
    for payload in (b"[" * 1000, b'{"state": "online", "x": ' + b"9" * 5000 + b"}"):
        view.offer(message("tts/a/status", payload))
        view.offer(message("tts/a/health", payload))
        view.offer(message("tts/b/status", payload))
        assert event_for(message("tts/a/events", payload), "s1", None, None) is None
    assert [(r.device, r.state) for r in view.rows(now=NOW)] == [("a", "online")]
    assert view.counts() == {"over_cap": 0, "oversize": 0, "invalid": 6}
    deep_event = b'{"id": "s1", "event": "finished", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    assert event_for(message("tts/a/events", deep_event), "s1", None, None) is None
