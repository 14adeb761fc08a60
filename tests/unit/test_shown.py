"""Strings from the broker are shown escaped (#27 item 12): ``fleet``'s table and the account of
a group send (and the no-answer line of send --wait) print no control character, ESC or bidi
override a retained message or an event carried.
(The same over a real broker: tests/integration/test_fleet.py.)"""

from __future__ import annotations

import json
import queue
import time
from typing import Any

import pytest

from agent.commands import CommandError, shown
from agent.commands.fleet import format_rows
from agent.commands.send_account import Account, summary
from agent.commands.send_wait import await_final
from agent.mqtt.client import InboundMessage
from agent.mqtt.fleet_view import FleetView
from agent.mqtt.topics import Namespace, Topic

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
NOW = 1_800_000_000.0


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on."""
    return [c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0
            or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069]


def message(topic: str, payload: dict[str, Any]) -> InboundMessage:
    return InboundMessage(Topic(topic), json.dumps(payload).encode(), True, False, None, None,
                          None, time.monotonic())


def test_controls_escapes_and_bidi_overrides_are_written_out() -> None:
    assert shown(TITLE) == "\\x1b]0;pwned\\x07"
    assert shown(CLEAR) == "\\x1b[2J"
    assert shown("a\tb\nc\rd\x00\x7f\x85\x9b") == "a\\x09b\\x0ac\\x0dd\\x00\\x7f\\x85\\x9b"
    assert shown("evil\u202egnp.exe\u2066x\u2069") == "evil\\u202egnp.exe\\u2066x\\u2069"
    assert [shown(chr(c)) for c in (0x202A, 0x202B, 0x202C, 0x202D, 0x2067, 0x2068)] == [
        "\\u202a", "\\u202b", "\\u202c", "\\u202d", "\\u2067", "\\u2068"]
    plain = "lobby-1 ok: audio \u00e9t\u00e9 \u4e2d\u6587 \\x1b 100% {}"
    assert shown(plain) == plain  # printable text (backslashes, non-ASCII) stays as it is
    every = "".join(chr(c) for c in range(0x3000))
    assert unsafe(shown(every)) == []


def test_the_table_shows_every_broker_string_escaped() -> None:
    view = FleetView(Namespace("tts"))
    view.offer(message("tts/evil/status", {
        "state": "online", "device": "evil", "groups": [f"g{CLEAR}"],
        "version": f"1{TITLE}", "default_voice": "v\u202eoice", "health_interval_s": 30}))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(NOW))
    view.offer(message("tts/evil/health", {"state": f"bad{CLEAR}", "reasons": [f"r{TITLE}"],
                                           "time": stamp}))
    lines = format_rows(view.rows(now=NOW))
    text = "\n".join(lines)
    assert unsafe(text.replace("\n", "")) == [], text
    cells = lines[1].split()
    assert cells[:5] == ["evil", "online", "g\\x1b[2J", "v\\u202eoice", "1\\x1b]0;pwned\\x07"]
    assert cells[6] == "bad\\x1b[2J" and cells[-1] == "r\\x1b]0;pwned\\x07", lines
    assert len(lines[0]) <= len(lines[1])  # the columns are as wide as the escaped cells


def test_the_summary_of_a_group_send_shows_broker_strings_escaped() -> None:
    evil = f"d{TITLE}"
    account = Account({"a", evil, f"s{CLEAR}"}, timeout=5)
    account.finals["a"] = {"event": "rejected", "reason": f"no{CLEAR} voice"}
    account.finals[evil] = {"event": f"failed{TITLE}"}
    account.extra["x\u202e"] = {"event": "finished"}
    lines = summary(account, "lobby", {"q\x1b": "stopped"})
    assert unsafe("".join(lines)) == [], lines
    assert lines[1] == ("failed: a (rejected: no\\x1b[2J voice), "
                        "d\\x1b]0;pwned\\x07 (failed\\x1b]0;pwned\\x07)")
    assert lines[2] == "no answer: s\\x1b[2J"
    assert lines[3] == "extra (not online in the retained status when sent): x\\u202e (finished)"
    assert lines[4] == "not online when sent: q\\x1b (stopped)"


def test_the_no_answer_line_of_send_wait_shows_the_last_event_escaped() -> None:
    inbox: queue.Queue[InboundMessage] = queue.Queue()
    inbox.put(message("tts/d/events", {"id": "r1", "event": f"started{TITLE}"}))
    with pytest.raises(CommandError) as raised:
        await_final(inbox, "r1", 0.2, reply=None, correlation=None, single=True,
                    progress=False)
    assert unsafe(str(raised.value)) == []
    assert "after 'started\\x1b]0;pwned\\x07'" in str(raised.value), str(raised.value)
