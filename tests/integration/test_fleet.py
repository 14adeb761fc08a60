"""The fleet view and the account of group commands (#18) over a real Mosquitto.

- ``tts-agent fleet`` lists the devices from their retained status and health: one running
  (online), one stopped cleanly (stopped), one killed with SIGKILL (the broker's Last Will:
  offline), and one whose retained health is far older than its health interval (silent);
  ``--group``, ``--state`` and ``--json`` select and shape the list.
- ``send --group lobby speak ... --wait`` expects the group's online members (from the retained
  status, before the command is published), prints each one's final event and a summary, and
  returns as soon as every one answered (the ``--timeout`` is far above the test's own bound, so
  the old code, which always waited the whole timeout, fails it); with one member stopped
  (SIGSTOP: its status still says online) it exits 3 and names that device, and when that
  member's Last Will comes during the wait, the wait ends then.
- The reader's memory is bounded: a flood of retained topics past its cap is counted, not kept,
  and a payload over its size cap is counted without being read.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.client import MqttClient
from agent.mqtt.fleet_view import FleetView
from agent.mqtt.topics import Namespace
from agent.settings import Settings
from tests.support.broker import (
    Broker,
    Recorder,
    agent_env,
    agent_settings,
    daemon,
    running_agent,
)
from tests.support.cli import AGENT, agent_cli

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
_CLEAR = b"\x1b[H\x1b[J"
BOUND_S = 120
"""Upper bound on a ``send`` that must end once everyone answered (its --timeout is 600 s)."""


def tts(*args: str, settings: Settings,
        timeout: float = BOUND_S) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=agent_env(settings), timeout=timeout)


def settings_for(broker: Broker, models: Path, work: Path, device: str, *groups: str,
                 **mqtt: Any) -> Settings:
    return agent_settings(broker, models, work / device, device_id=device,
                          mqtt={"groups": list(groups), **mqtt})


def wait_state(broker: Broker, device: str, state: str) -> dict[str, Any]:
    topic = NS.device(device).status
    with Recorder(broker.settings(), [topic.as_filter()], f"watch-{device}") as watch:
        return watch.wait_json(topic, lambda p: p["state"] == state, timeout=60)


def wait_health(broker: Broker, device: str) -> None:
    topic = NS.device(device).health
    with Recorder(broker.settings(), [topic.as_filter()], f"health-{device}") as watch:
        watch.wait_json(topic, lambda p: True, timeout=60)


def table(stdout: str) -> dict[str, list[str]]:
    """``fleet``'s lines by device id (the header left out), split into columns."""
    lines = stdout.splitlines()
    assert lines and lines[0].split()[:2] == ["DEVICE", "STATE"], stdout
    return {line.split()[0]: line.split() for line in lines[1:]}


@pytest.fixture()
def fleet(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Iterator[Settings]:
    """lobby-1 running (lobby), lobby-2 stopped cleanly (lobby, hall), hall-1 killed -9 (hall),
    old-1 a retained online status with a health report hours old; the controller's settings."""
    models = tiny_voice_dir.parent
    with ExitStack() as stack:
        stack.enter_context(running_agent(settings_for(mqtt_broker, models, tmp_path,
                                                       "lobby-1", "lobby")))
        with running_agent(settings_for(mqtt_broker, models, tmp_path, "lobby-2", "lobby",
                                        "hall")):
            wait_state(mqtt_broker, "lobby-2", "online")
        hall = settings_for(mqtt_broker, models, tmp_path, "hall-1", "hall", keepalive_s=5)
        with daemon(hall, tmp_path / "hall-1.log") as process:
            wait_state(mqtt_broker, "hall-1", "online")
            wait_health(mqtt_broker, "hall-1")
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        wait_state(mqtt_broker, "hall-1", "offline")
        wait_state(mqtt_broker, "lobby-1", "online")
        wait_health(mqtt_broker, "lobby-1")
        old = NS.device("old-1")
        hours_ago = datetime.fromtimestamp(time.time() - 7200, UTC).isoformat(timespec="seconds")
        with Recorder(mqtt_broker.settings(), [], "old-1") as publisher:
            publisher.publish(old.status, {"state": "online", "device": "old-1",
                                           "groups": ["hall"], "health_interval_s": 30},
                              retain=True)
            publisher.publish(old.health, {"state": "ok", "reasons": [], "device_id": "old-1",
                                           "version": "0.1", "time": hours_ago}, retain=True)
        yield settings_for(mqtt_broker, models, tmp_path, "controller")


def test_fleet_lists_devices_from_retained_topics(fleet: Settings) -> None:
    result = tts("fleet", settings=fleet)
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert set(rows) == {"lobby-1", "lobby-2", "hall-1", "old-1"}, result.stdout
    assert rows["lobby-1"][1:4] == ["online", "lobby", "tiny-test"]
    assert rows["lobby-2"][1:3] == ["stopped", "lobby,hall"]
    assert rows["hall-1"][1:3] == ["offline", "hall"]  # the Last Will keeps the groups
    assert rows["old-1"][1] == "silent"
    health = {device: row[6] for device, row in rows.items()}  # the HEALTH column
    assert health["lobby-1"] in ("ok", "degraded"), result.stdout
    assert health["lobby-2"] == health["hall-1"] == health["old-1"] == "stale", result.stdout


def test_fleet_filters_and_json(fleet: Settings) -> None:
    result = tts("fleet", "--group", "hall", settings=fleet)
    assert result.returncode == 0, result.stderr
    assert set(table(result.stdout)) == {"lobby-2", "hall-1", "old-1"}
    result = tts("fleet", "--state", "offline", "--state", "silent", settings=fleet)
    assert set(table(result.stdout)) == {"hall-1", "old-1"}
    result = tts("fleet", "--json", "--group", "lobby", settings=fleet)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["count"] == 2 and document["known"] == 4
    assert document["dropped"] == {"over_cap": 0, "oversize": 0, "invalid": 0}
    devices = {d["device"]: d for d in document["devices"]}
    assert set(devices) == {"lobby-1", "lobby-2"}
    assert list(devices["lobby-1"]) == ["device", "state", "groups", "voice", "version",
                                        "health", "queue", "pending", "last_error",
                                        "health_age_s", "clock_offset_ms"]
    assert devices["lobby-1"]["clock_offset_ms"] is None  # no ping: not measured
    one = devices["lobby-1"]
    assert one["state"] == "online" and one["groups"] == ["lobby"] and one["voice"] == "tiny-test"
    assert one["health"] in ("ok", "degraded") and one["queue"] == 0
    assert isinstance(one["health_age_s"], float) and isinstance(one["version"], str)


def test_fleet_watch_prints_changes_and_ends_with_ctrl_c(fleet: Settings,
                                                         mqtt_broker: Broker) -> None:
    process = subprocess.Popen([*AGENT, "fleet", "--watch"],
                               env=agent_env(fleet), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()],
                     daemon=True).start()

    def next_line() -> str:
        return lines.get(timeout=60)

    try:
        assert next_line().split()[:2] == ["DEVICE", "STATE"]  # not a TTY: plain lines
        first = {next_line().split()[0] for _ in range(4)}
        assert first == {"lobby-1", "lobby-2", "hall-1", "old-1"}
        with Recorder(mqtt_broker.settings(), [], "new-1") as publisher:
            publisher.publish(NS.device("new-1").status, {"state": "online", "device": "new-1"},
                              retain=True)
        line = next_line()
        while not line.startswith("new-1"):  # a health report may come meanwhile
            line = next_line()
        assert line.split()[1] == "online"
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def redrawn(seen: bytes) -> bool:
    """Whether ``seen`` holds a redraw whose table has arrived whole (a read may end mid-table)."""
    if seen.count(_CLEAR) < 2:
        return False
    last = seen.rsplit(_CLEAR, 1)[-1].decode(errors="replace").replace("\r", "")
    lines = last.splitlines()
    return (last.endswith("\n") and len(lines) >= 5
            and lines[0].split()[:2] == ["DEVICE", "STATE"])


def test_fleet_watch_redraws_in_place_on_a_terminal(fleet: Settings) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen([*AGENT, "fleet", "--watch"],
                               env=agent_env(fleet), stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while not redrawn(seen) and time.monotonic() < deadline:  # drawn, then redrawn whole
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                seen += os.read(leader, 65536)
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        os.close(leader)
    last = seen.rsplit(_CLEAR, 1)[-1].decode()
    assert seen.count(_CLEAR) >= 2, seen[-2000:]
    assert set(table(last.replace("\r", ""))) == {"lobby-1", "lobby-2", "hall-1", "old-1"}


def test_the_ping_probe_does_not_disturb_the_retained_view(fleet: Settings) -> None:
    """``--probe always`` pings the fleet on Mosquitto too: the running device answers, and
    every row stays what the retained status and health say (the stopped, the dead and the
    silent device included); ``auto`` does not ping where the retained topics name devices."""
    def rows(*args: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        result = tts("fleet", "--json", "--settle", "2", *args, settings=fleet)
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        return document, {d["device"]: {k: v for k, v in d.items()
                                        if k not in ("health_age_s", "clock_offset_ms")}
                          for d in document["devices"]}

    read, retained = rows("--probe", "never")
    pinged, probed = rows("--probe", "always")
    assert probed == retained, (probed, retained)  # the ping adds the clocks, changes nothing
    clocks = {d["device"]: d["clock_offset_ms"] for d in pinged["devices"]}
    assert isinstance(clocks["lobby-1"], float) and clocks["hall-1"] is None, clocks
    assert set(retained) == {"lobby-1", "lobby-2", "hall-1", "old-1"}
    assert read["answered_ping"] == 0 and pinged["answered_ping"] == 1
    auto, _ = rows()
    assert auto["answered_ping"] == 0


def test_fleet_refuses_bad_options(fleet: Settings) -> None:
    result = tts("fleet", "--settle", "0", settings=fleet)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "--settle" in result.stderr
    result = tts("fleet", "--state", "asleep", settings=fleet)
    assert result.returncode == 2 and "--state" in result.stderr
    result = tts("fleet", "--probe", "sometimes", settings=fleet)
    assert result.returncode == 2 and "--probe" in result.stderr


@pytest.fixture()
def lobby(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Iterator[Settings]:
    """Two agents in group lobby and one in group hall, all online; the controller's settings."""
    models = tiny_voice_dir.parent
    with ExitStack() as stack:
        for device, group in (("lobby-1", "lobby"), ("lobby-2", "lobby"), ("hall-1", "hall")):
            stack.enter_context(running_agent(settings_for(mqtt_broker, models, tmp_path,
                                                           device, group)))
        for device in ("lobby-1", "lobby-2", "hall-1"):
            wait_state(mqtt_broker, device, "online")
        yield settings_for(mqtt_broker, models, tmp_path, "controller")


def test_group_speak_accounts_for_every_member_and_returns_once_all_answered(
        lobby: Settings) -> None:
    result = tts("send", "--group", "lobby", "speak", "Doors closing.", "--wait",
                 "--timeout", "600", settings=lobby)
    assert result.returncode == 0, result.stderr
    finals = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(e["device"] for e in finals) == ["lobby-1", "lobby-2"]
    assert {e["event"] for e in finals} == {"finished"}
    assert "group lobby: 2 expected (online), 2 answered: 2 succeeded, 0 failed, 0 no answer" \
        in result.stderr, result.stderr
    result = tts("send", "--all", "ping", "--wait", "--timeout", "600", settings=lobby)
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(line)["device"] for line in result.stdout.splitlines()) == [
        "hall-1", "lobby-1", "lobby-2"]
    assert "the fleet: 3 expected (online), 3 answered" in result.stderr


def test_the_account_over_mqtt_3_1_1(lobby: Settings) -> None:
    """Over 3.1.1 the finals come from the events wildcard by id (no Response Topic)."""
    result = tts("send", "-V", "3.1.1", "--group", "lobby", "ping", "--wait", "--timeout", "600",
                 settings=lobby)
    assert result.returncode == 0, result.stderr
    finals = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(e["device"] for e in finals) == ["lobby-1", "lobby-2"]
    assert {e["event"] for e in finals} == {"pong"}
    assert "2 expected (online), 2 answered: 2 succeeded" in result.stderr
    result = tts("fleet", "-V", "3.1.1", "--json", settings=lobby)
    assert result.returncode == 0, result.stderr
    assert {d["device"] for d in json.loads(result.stdout)["devices"]} == {
        "lobby-1", "lobby-2", "hall-1"}


def test_group_speak_with_a_member_stopped_names_it(lobby: Settings, mqtt_broker: Broker,
                                                    tiny_voice_dir: Path,
                                                    tmp_path: Path) -> None:
    stuck = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path, "lobby-3", "lobby")
    with daemon(stuck, tmp_path / "lobby-3.log") as process:
        wait_state(mqtt_broker, "lobby-3", "online")
        process.send_signal(signal.SIGSTOP)  # its status still says online (keepalive 30 s)
        try:
            result = tts("send", "--group", "lobby", "speak", "Doors closing.", "--wait",
                         "--timeout", "5", settings=lobby)
        finally:
            process.send_signal(signal.SIGCONT)
    assert result.returncode == 3, result.stderr
    assert sorted(json.loads(line)["device"] for line in result.stdout.splitlines()) == [
        "lobby-1", "lobby-2"]
    lines = result.stderr.splitlines()
    assert "3 expected (online), 2 answered: 2 succeeded, 0 failed, 1 no answer within 5 s" \
        in lines[0], result.stderr
    assert "tts-agent send: no answer: lobby-3" in lines, result.stderr


@pytest.mark.slow
def test_a_member_stopped_cleanly_is_named_not_failed_and_fleet_forget_retires_it(
        lobby: Settings, mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#28 item 8. A member whose retained status says stopped is named in the summary but does
    not make the exit status 3 (it was 3 until its retained messages were deleted by hand);
    ``fleet`` shows its health ``stale``; ``fleet forget`` clears its retained status and health
    (refused for an online device, exit 2 for a bad id), after which it is neither listed nor
    named."""
    member = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path, "lobby-3", "lobby")
    with daemon(member, tmp_path / "lobby-3.log") as process:
        wait_state(mqtt_broker, "lobby-3", "online")
        wait_health(mqtt_broker, "lobby-3")
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    wait_state(mqtt_broker, "lobby-3", "stopped")
    result = tts("send", "--group", "lobby", "speak", "Doors closing.", "--wait",
                 "--timeout", "600", settings=lobby)
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(line)["device"] for line in result.stdout.splitlines()) == [
        "lobby-1", "lobby-2"]
    assert "tts-agent send: not online when sent: lobby-3 (stopped)" in \
        result.stderr.splitlines(), result.stderr
    listed = json.loads(tts("fleet", "--json", settings=lobby).stdout)["devices"]
    stopped = next(d for d in listed if d["device"] == "lobby-3")
    assert (stopped["state"], stopped["health"]) == ("stopped", "stale"), stopped

    bad = tts("fleet", "forget", "no/such", settings=lobby)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    running = tts("fleet", "forget", "lobby-1", "lobby-3", settings=lobby)
    assert running.returncode == 1, running.stderr
    assert "not forgotten: lobby-1 online" in running.stderr and running.stdout == ""
    forgot = tts("fleet", "forget", "lobby-3", settings=lobby)
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout.splitlines() == [
        "forgot lobby-3: tts/lobby-3/status (stopped), tts/lobby-3/health"], forgot.stdout
    listed = json.loads(tts("fleet", "--json", settings=lobby).stdout)["devices"]
    assert {d["device"] for d in listed} >= {"lobby-1", "lobby-2"}
    assert "lobby-3" not in {d["device"] for d in listed}
    result = tts("send", "--group", "lobby", "ping", "--wait", "--timeout", "600",
                 settings=lobby)
    assert result.returncode == 0, result.stderr
    assert "lobby-3" not in result.stderr, result.stderr


@pytest.mark.slow
def test_a_member_whose_last_will_comes_during_the_wait_is_not_waited_for(
        lobby: Settings, mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """SIGSTOP with a 15 s keepalive: still online when the membership is read (the broker
    gives up on it after 1.5 keepalives), its Last Will comes during the wait, which ends then,
    not at the 600 s --timeout."""
    stuck = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path, "lobby-3", "lobby",
                         keepalive_s=15)
    with daemon(stuck, tmp_path / "lobby-3.log") as process:
        wait_state(mqtt_broker, "lobby-3", "online")
        process.send_signal(signal.SIGSTOP)
        try:
            result = tts("send", "--group", "lobby", "speak", "Doors closing.", "--wait",
                         "--timeout", "600", settings=lobby)
        finally:
            process.send_signal(signal.SIGCONT)
    assert result.returncode == 3, result.stderr
    assert "tts-agent send: no answer: lobby-3 (went offline)" in result.stderr.splitlines(), \
        result.stderr


def test_group_command_with_a_failure_exits_1_and_names_the_device(lobby: Settings) -> None:
    result = tts("send", "--group", "lobby", "speak", "x", "--voice", "nobody", "--wait",
                 "--timeout", "600", settings=lobby)
    assert result.returncode == 1, result.stderr
    failed = [line for line in result.stderr.splitlines() if "failed: " in line
              and "expected" not in line]
    assert len(failed) == 1 and "lobby-1 (rejected" in failed[0] and "lobby-2 (rejected" \
        in failed[0], result.stderr


def test_a_flood_past_the_cap_is_counted_not_kept(mqtt_broker: Broker, tiny_voice_dir: Path,
                                                  tmp_path: Path) -> None:
    with Recorder(mqtt_broker.settings(), [], "flood") as publisher:
        for index in range(300):
            device = NS.device(f"d{index:03d}")
            publisher.publish(device.status, {"state": "online", "device": device.device_id},
                              retain=True)
        publisher.publish(NS.device("bad-1").status, b"not json", retain=True)
    big = b"{" + b" " * 200_000 + b"}"  # past the agent's own client's limit: as a foreign one
    mosquitto_pub = shutil.which("mosquitto_pub")
    assert mosquitto_pub, "mosquitto_pub (Debian's mosquitto-clients) is needed"
    subprocess.run([mosquitto_pub, "-h", mqtt_broker.host, "-p", str(mqtt_broker.port), "-q",
                    "1", "-r", "-t", NS.device("big-1").health.value, "-s"], input=big,
                   check=True, timeout=30)
    view = FleetView(NS, max_devices=100)
    client = MqttClient(mqtt_broker.settings(), "fleet-view", subscriptions=view.filters(),
                        on_message=view.receive, persistent=False)
    client.start()
    try:
        assert client.wait_ready(30)
        deadline = time.monotonic() + 60
        while sum(view.counts().values()) + len(view) < 302 and time.monotonic() < deadline:
            view.settle(1.0, longest_s=10)
    finally:
        client.close(timeout=3)
    assert len(view) == 100
    assert view.counts() == {"over_cap": 200, "oversize": 1, "invalid": 1}
    assert view.record("big-1") is None and view.record("bad-1") is None
    result = tts("fleet", "--state", "unknown", settings=settings_for(
        mqtt_broker, tiny_voice_dir.parent, tmp_path, "controller"))
    assert result.returncode == 0, result.stderr
    assert "messages not kept: 1 over 131072 bytes; 1 not the agent's JSON" in result.stderr


def test_fleet_shows_the_strings_of_retained_messages_escaped(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """A client that can publish a retained status or health message cannot clear the
    operator's screen or set the terminal's title (#27): the table shows its strings escaped;
    ``--json`` stays JSON that gives them back as they were."""
    title, clear = "\x1b]0;pwned\x07", "\x1b[2J"
    evil = NS.device("evil-1")
    now = datetime.now(UTC).isoformat(timespec="seconds")
    with Recorder(mqtt_broker.settings(), [], "evil-1") as publisher:
        publisher.publish(evil.status, {"state": "online", "device": "evil-1",
                                        "groups": [f"lobby{clear}"], "version": f"6{clear}",
                                        "default_voice": f"v{title}\u202e",
                                        "health_interval_s": 30}, retain=True)
        publisher.publish(evil.health, {"state": "degraded", "reasons": [f"{title}{clear}x"],
                                        "device_id": "evil-1", "time": now}, retain=True)
    controller = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path, "controller")
    result = tts("fleet", settings=controller)
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert not {"\x1b", "\x07", "\u202e"} & set(shown), ascii(shown)
    row = table(result.stdout)["evil-1"]
    assert row[1:5] == ["online", "lobby\\x1b[2J", "v\\x1b]0;pwned\\x07\\u202e", "6\\x1b[2J"]
    assert row[-1] == "\\x1b]0;pwned\\x07\\x1b[2Jx", result.stdout
    document = json.loads(tts("fleet", "--json", settings=controller).stdout)
    device = document["devices"][0]
    assert device["last_error"] == f"{title}{clear}x" and device["groups"] == [f"lobby{clear}"]


class RetainedStream:
    """A raw client publishing retained statuses of ``count`` devices (group ``elsewhere``,
    offline), round and round with no pause, until the block ends: a retained read that never
    gets its quiet ``--settle`` (#27: 99 000 devices read at 0.5 s gave the same)."""

    def __init__(self, broker: Broker, count: int = 500) -> None:
        self.recorder = Recorder(broker.settings(), [], "stream")
        self.count = count
        self.stop = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            device = NS.device(f"stream-{self.sent % self.count:04d}")
            self.recorder.publish(device.status, {"state": "offline", "device": device.device_id,
                                                  "groups": ["elsewhere"]}, retain=True)
            self.sent += 1

    def __enter__(self) -> RetainedStream:
        self.recorder.__enter__()
        self.thread.start()
        deadline = time.monotonic() + 30
        while self.sent < self.count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.sent >= self.count, "the stream did not get going"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        self.recorder.__exit__(*exc)


@pytest.mark.slow
def test_a_retained_read_cut_off_at_its_limit_is_said(lobby: Settings,
                                                      mqtt_broker: Broker) -> None:
    """#27 item 10: the read stops at 20 x --settle (at least 10 s, or --read-limit) while
    retained messages are still coming; ``fleet`` says so on stderr (also with --json) and in
    the JSON (``complete``, ``read``, ``cut_off_s``); once the messages stop, the read is
    complete again."""
    with RetainedStream(mqtt_broker):
        started = time.monotonic()
        result = tts("fleet", "--json", "--group", "lobby", "--settle", "0.5", settings=lobby)
        took = time.monotonic() - started
        limited = tts("fleet", "--settle", "1", "--read-limit", "2", settings=lobby)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["complete"] is False and document["cut_off_s"] == 10, document
    assert document["read"] > 0 and took < 60, (document["read"], took)
    assert "tts-agent fleet: the list is incomplete: the retained read was cut off at 10 s " \
        "(--read-limit) after " in result.stderr, result.stderr
    assert limited.returncode == 0, limited.stderr
    assert "the list is incomplete: the retained read was cut off at 2 s" in limited.stderr, \
        limited.stderr
    result = tts("fleet", "--json", "--settle", "0.5", settings=lobby)
    document = json.loads(result.stdout)
    assert document["complete"] is True and document["cut_off_s"] is None, document
    assert document["known"] >= 500 + 3 and "incomplete" not in result.stderr, result.stderr
    for bad in ("0", "-1", "nan", "3601"):
        refused = tts("fleet", "--read-limit", bad, settings=lobby)
        assert refused.returncode == 2 and "--read-limit must be more than 0" in refused.stderr, \
            refused.stderr


@pytest.mark.slow
def test_a_group_wait_with_its_membership_cut_off_exits_3(lobby: Settings,
                                                         mqtt_broker: Broker) -> None:
    """#27 item 10: every member read answers, but the read was cut off (at 20 x --settle 0.5:
    10 s): the membership may miss members, so ``send --group --wait`` exits 3 and says why."""
    with RetainedStream(mqtt_broker):
        result = tts("send", "--group", "lobby", "ping", "--wait", "--settle", "0.5",
                     "--timeout", "600", settings=lobby)
    assert result.returncode == 3, result.stderr
    assert {json.loads(line)["event"] for line in result.stdout.splitlines()} <= {"pong"}
    lines = result.stderr.splitlines()
    assert any(line.startswith("tts-agent send: membership incomplete: the retained read was "
                               "cut off at 10 s (--read-limit) after ") for line in lines), lines
    result = tts("send", "--group", "lobby", "ping", "--wait", "--timeout", "600",
                 settings=lobby)
    assert result.returncode == 0 and "incomplete" not in result.stderr, result.stderr


def test_a_member_offline_when_sent_that_comes_back_and_finishes_is_counted(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#27 item 11: porch-1's retained status says offline (its Last Will) when the group
    speak is sent; it comes back (its persistent session holds the command), speaks and
    finishes: its answer is printed and counted, the wait ends with it, exit 0."""
    member = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path, "porch-1", "porch")
    with daemon(member, tmp_path / "porch-1.log") as process:
        wait_state(mqtt_broker, "porch-1", "online")
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    wait_state(mqtt_broker, "porch-1", "offline")
    controller = settings_for(mqtt_broker, tiny_voice_dir.parent, tmp_path, "controller")
    command = NS.group_command("porch", "speak")
    with Recorder(mqtt_broker.settings(), [command.as_filter()], "porch-watch") as watch:
        send = subprocess.Popen(
            [*AGENT, "send", "--group", "porch", "speak", "Doors closing.", "--wait",
             "--timeout", "40"], env=agent_env(controller), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            watch.wait_for(lambda m: m.topic == command, timeout=60)
            with running_agent(member):
                stdout, stderr = send.communicate(timeout=BOUND_S)
        finally:
            send.kill()
            send.wait(10)
    assert send.returncode == 0, stderr
    finals = [json.loads(line) for line in stdout.splitlines()]
    assert [(e["device"], e["event"]) for e in finals] == [("porch-1", "finished")], stdout
    lines = stderr.splitlines()
    assert lines[0].startswith("tts-agent send: group porch: 0 expected (online) + 1 back "
                               "online, 1 answered: 1 succeeded, 0 failed, 0 no answer"), lines
    assert "tts-agent send: answered after not online when sent: porch-1 (offline when sent; " \
        "finished)" in lines, lines
    assert not any("extra" in line or line.startswith("tts-agent send: not online when sent")
                   for line in lines), lines
