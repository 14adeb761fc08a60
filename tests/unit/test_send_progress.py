"""``progress`` events for open speak requests, and what ``tts-agent send`` refuses before it
connects (#19 items 6 and 7).

The tracker runs on a hand-driven clock; its publisher is a recorder (wiring only: the real
broker and agent are in tests/integration/test_send_cli.py).
"""

from __future__ import annotations

import json
import re

import pytest

from agent.cli import main
from agent.mqtt.protocol import CommandEvent
from agent.mqtt.publisher import EventPublisher, ReplyRoute
from agent.mqtt.topics import Namespace, Topic
from agent.mqtt.tracker import RequestTracker
from tests.support import recorders
from tests.support.clock import FakeClock

DEV = Namespace("tts").device("d1")


class Sent(recorders.Sent):
    def kinds(self, request_id: str) -> list[str]:
        events = [json.loads(m.payload) for m in self.messages if m.topic == DEV.events]
        return [e["event"] + (f":{e['state']}" if "state" in e else "")
                for e in events if e["id"] == request_id]


def test_an_open_request_gets_progress_after_each_quiet_interval() -> None:
    sent, clock = Sent(), FakeClock()
    tracker = RequestTracker(EventPublisher(sent, DEV), clock=clock)
    tracker.open("a", "speak", voice="v")
    assert tracker.heartbeat(5.0) == 0  # just accepted
    clock.advance(4.9)
    assert tracker.heartbeat(5.0) == 0
    clock.advance(0.1)
    assert tracker.heartbeat(5.0) == 1
    assert tracker.heartbeat(5.0) == 0  # at most one per interval
    clock.advance(2.0)
    tracker.progress("a", "started")
    clock.advance(4.0)
    assert tracker.heartbeat(5.0) == 0  # "started" was an event: quiet for 4 s only
    tracker.open("b", "speak")
    clock.advance(1.0)
    assert tracker.heartbeat(5.0) == 1  # only "a" has been quiet for 5 s
    clock.advance(5.0)
    assert tracker.heartbeat(5.0) == 2
    tracker.finish("a", "finished", audio_s=12.0)
    clock.advance(10.0)
    assert tracker.heartbeat(5.0) == 1  # an ended request gets none
    assert sent.kinds("a") == ["accepted", "progress:waiting", "started", "progress:playing",
                               "progress:playing", "finished"]
    assert sent.kinds("b") == ["accepted", "progress:waiting", "progress:waiting"]


def test_progress_is_not_final_and_keeps_the_sticky_fields() -> None:
    sent, clock = Sent(), FakeClock()
    tracker = RequestTracker(EventPublisher(sent, DEV), clock=clock)
    reply = Topic("ctl/replies/1")
    tracker.open("a", "speak", reply=ReplyRoute(reply, b"c"), voice="v", priority="high")
    clock.advance(6.0)
    tracker.heartbeat(5.0)
    payload = json.loads(sent.messages[-1].payload)
    assert payload.pop("final") is False
    progress = CommandEvent.model_validate(payload)  # the agent's own schema
    assert (progress.event, progress.state) == ("progress", "waiting")
    assert (progress.voice, progress.priority, progress.command) == ("v", "high", "speak")
    assert [m.topic for m in sent.messages] == [DEV.events, DEV.events]  # not on the reply


@pytest.mark.parametrize(("args", "words"), [
    (["--timeout", "-1"], "--timeout must be more than 0"),
    (["--timeout", "0"], "--timeout must be more than 0"),
    (["--timeout", "nan"], "--timeout must be more than 0"),
    (["--connect-timeout", "0"], "--connect-timeout must be more than 0"),
    (["-P", "hunter2"], "--password-file"),
    (["-p", "70000"], "-p/--port must be 1-65535"),
])
def test_send_refuses_bad_options_with_one_line_and_exit_2(
        args: list[str], words: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTS_AGENT_MQTT__PORT", "1")  # nothing is contacted anyway
    status = main(["send", "--device", "d1", *args, "ping", "--wait"])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.splitlines()) == 1 and words in err, err
    assert "hunter2" not in err


def test_send_h_is_the_host_and_help_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["send", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    # Python 3.13's argparse names the metavar once ("-h, --host HOST"), older ones twice.
    host = re.compile(r"^  -h( HOST)?, --host HOST\b", re.MULTILINE)
    assert host.search(out) and "--password-file FILE" in out, out
    with pytest.raises(SystemExit) as done:
        main(["send", "--device", "d1", "speak", "--help"])
    assert done.value.code == 0
    assert host.search(capsys.readouterr().out)
