"""A seeded, bounded fuzz of every command topic against ``tts-agent run`` (issue #14).

A few thousand messages, hostile and valid mixed, go through a real Mosquitto to the agent as a
process: its own command topics, its group's and the fleet's, ``hermes/tts/say`` (this site and
others) and command topics longer than the agent's limit. Cheap valid commands (ping, volume,
stop) and a few short speaks against the tiny voice are mixed with random bytes, deep nesting,
huge integers, bad UTF-8, wrong types, unknown fields and commands, lone surrogates and
oversize payloads.

Every message that carries a readable id has a unique one (``fz-<n>``) and must get exactly one
final event under it; every other message that reaches a command topic must get one final
under a generated id (counted); a Hermes say for this site gets exactly one ``sayFinished``;
messages for other devices, groups and sites get nothing. Then (#27) the Home Assistant notify
topic, with pings between: plain text (numbers, control characters, ``[Alarm] ...``) and
``speak`` objects to be spoken, and JSON arrays, deep nesting, oversize, bad UTF-8, empty and
ill-typed payloads to be refused; each carries a Response Topic, where its one final event
must come with its Correlation Data (``finished`` for the valid ones: spoken). The daemon's
log must hold no traceback and no error, and the agent must still speak afterwards. Messages
go out in windows, each waited for, so the agent's outgoing queue is never the limit tested.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pytest

from agent.mqtt.client import InboundMessage, MqttClient
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY, HERMES_SAY_FINISHED, Namespace
from agent.settings import Settings
from tests.support.broker import Broker, agent_settings, daemon
from tests.support.raw_mqtt import RawPublisher

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

SEED = 1414
MESSAGES = 3_000
WINDOW = 100
SPEAKS = 30
OVERSIZE = 12
NS = Namespace("tts")
DEV = NS.device("t1")
GROUP = "lobby"
MAX_PAYLOAD = 65_536
WAIT_S = 120.0
SENTENCES = ("Doors closing.", "Mind the gap.", "Platform two.", "Hello there.")
NOTIFY = 300
NOTIFY_SPEAKS = 24
NOTIFY_OVERSIZE = 4
REPLY = NS.reply("fuzz")
SPOKEN_NOTIFY = ("42", "-3.5", "[Alarm] front door open.", "Caf\u00e9 is open.",
                 "\x1b[2J Alarm\x07 at the door.", "Tab\there.\r\n", *SENTENCES)

Expect = Literal["id", "anon", "none"]
"""``id``: one final under the message's id; ``anon``: one final under a generated id;
``none``: not for this agent, no answer."""


@dataclass(frozen=True)
class Message:
    topic: str
    payload: bytes
    expect: Expect
    request_id: str | None = None
    say_id: str | None = None
    """A Hermes say for this site: the id its ``sayFinished`` must carry."""
    correlation: bytes | None = None
    """Published with the Response Topic ``REPLY`` and this Correlation Data."""
    reply: str | None = None
    """The one final event expected on the Response Topic."""


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


class Fuzz:
    """Builds the seeded message list."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0
        self.speaks = 0
        self.oversize = 0
        self.notify_speaks = 0
        self.notify_oversize = 0

    def next_id(self) -> str:
        self.count += 1
        return f"fz-{self.count}"

    def command_topic(self, name: str) -> str:
        scope = self.rng.choice(("device", "device", "group", "fleet"))
        if scope == "device":
            return DEV.command(name).value
        if scope == "group":
            return NS.group_command(GROUP, name).value
        return NS.fleet_command(name).value

    def long_topic(self) -> str:
        name = "x" * self.rng.randint(520, 2_000)
        return self.rng.choice((f"tts/t1/cmd/{name}", f"tts/group/{GROUP}/cmd/{name}",
                                f"tts/all/cmd/{name}"))

    def random_bytes(self) -> bytes:
        size = self.rng.randint(0, 300)
        return b"\x80" + bytes(self.rng.getrandbits(8) for _ in range(size))  # never an object

    def deep(self, request_id: str) -> bytes:
        opener, closer, most = self.rng.choice(((b"[", b"]", 20_000), (b'{"a":', b"}", 10_000)))
        levels = self.rng.randint(250, most)  # within the payload limit
        nest = opener * levels + b"0" + closer * levels
        if self.rng.random() < 0.5:
            return b'{"id": "' + request_id.encode() + b'", "text": "x", "x": ' + nest + b"}"
        return b'{"x": ' + nest + b', "id": "' + request_id.encode() + b'", "text": "x"}'

    def valid(self) -> Message:
        request_id = self.next_id()
        name = self.rng.choice(("ping", "ping", "volume", "stop"))
        data: dict[str, Any] = {"id": request_id}
        if name == "volume":
            data["volume"] = round(self.rng.uniform(0.2, 1.0), 2)
        elif name == "stop":
            data["clear_queue"] = self.rng.random() < 0.3
        return Message(self.command_topic(name), _json(data), "id", request_id)

    def speak(self) -> Message:
        self.speaks += 1
        request_id = self.next_id()
        data = {"id": request_id, "text": self.rng.choice(SENTENCES)}
        return Message(self.command_topic("speak"), _json(data), "id", request_id)

    def hostile_with_id(self) -> Message:
        request_id = self.next_id()
        rid = request_id.encode()
        kind = self.rng.randrange(11)
        if kind == 10 and self.oversize < OVERSIZE:
            self.oversize += 1
            payload = _json({"id": request_id, "text": "x" * (MAX_PAYLOAD + 10)})
        elif kind in (0, 10):
            payload = self.deep(request_id)
        elif kind == 1:
            digits = b"9" * self.rng.randint(4_301, 20_000)
            payload = b'{"id": "' + rid + b'", "text": "a", "volume": ' + digits + b"}"
        elif kind == 2:
            payload = b'{"text": "caf\xe9 \xff", "id": "' + rid + b'"}'
        elif kind == 3:
            field, value = self.rng.choice((("text", 5), ("volume", "loud"), ("priority", 3),
                                            ("speed", [1]), ("voice", "../../etc/passwd"),
                                            ("text", ""), ("expires_in_s", -1)))
            payload = _json({"id": request_id, "text": "a", field: value})
        elif kind == 4:
            payload = _json({"id": request_id, "text": "a", "colour": {"r": 1}})
        elif kind == 5:
            payload = b'{"id": "' + rid + b'", "text": "\\ud800 lone"}'
        elif kind == 6:
            payload = b'{"id": "' + rid + b'", "text": "cut off'
        elif kind == 7:
            return Message(DEV.command(self.rng.choice(("launch", "SPEAK", "speak2"))).value,
                           _json({"id": request_id}), "id", request_id)
        elif kind == 8:
            return Message(self.long_topic(), _json({"id": request_id}), "id", request_id)
        else:
            payload = _json({"id": request_id, "text": "a" * 5_001})
        return Message(self.command_topic("speak"), payload, "id", request_id)

    def hostile_anonymous(self) -> Message:
        kind = self.rng.randrange(7)
        topic = self.command_topic(self.rng.choice(("speak", "volume", "stop")))
        if kind == 0:
            payload = self.random_bytes()
        elif kind == 1:
            payload = self.rng.choice((b"[1, 2]", b'"id"', b"null", b"42", b'["id", "fz-x"]'))
        elif kind == 2:
            bad_id = self.rng.choice((5, ["a"], "has space", "", "a" * 129, None))
            payload = json.dumps({"id": bad_id, "text": 7}).encode()
        elif kind == 3:
            payload = b'{"id": "\\ud800", "text": 7}'
        elif kind == 4:
            return Message(self.long_topic(), self.random_bytes(), "anon")
        elif kind == 5:
            return Message(self.command_topic("ping"), b"", "anon")  # a valid ping, no id
        else:
            payload = b'{"inner": {"id": "fz-inner"}, "text": 7}'
        return Message(topic, payload, "anon")

    def hermes(self) -> Message:
        request_id = self.next_id()
        kind = self.rng.randrange(6)
        if kind == 0 and self.speaks < SPEAKS:
            self.speaks += 1
            say = {"id": request_id, "siteId": "t1", "sessionId": "s", "text": "Dinner."}
            return Message(HERMES_SAY.value, _json(say), "id", request_id, request_id)
        if kind == 1:
            say = {"id": request_id, "siteId": "elsewhere", "text": self.rng.choice(SENTENCES)}
            return Message(HERMES_SAY.value, _json(say), "none", request_id)
        if kind == 2:
            payload = b'{"id": "\\ud800", "siteId": "t1", "text": "Hello."}'
            return Message(HERMES_SAY.value, payload, "anon", None, "\ud800")
        if kind == 3:
            return Message(HERMES_SAY.value, self.random_bytes(), "anon")
        rid = request_id.encode()
        payload = self.rng.choice((
            b'{"id": "' + rid + b'", "siteId": "t1", "sessionId": "\\udfff", "text": "x"}',
            b'{"id": "' + rid + b'", "siteId": "t1", "text": "caf\xe9"}',
            b'{"id": "' + rid + b'", "siteId": "t1", "text": 5}',
            b'{"id": "' + rid + b'", "siteId": "t1", "text": "x", "n": ' + b"[" * 3_000
            + b"]" * 3_000 + b"}",
        ))
        return Message(HERMES_SAY.value, payload, "id", request_id, request_id)

    def elsewhere(self) -> Message:
        request_id = self.next_id()
        topic = self.rng.choice((NS.device("t2").command("ping").value,
                                 NS.group_command("basement", "ping").value))
        return Message(topic, _json({"id": request_id}), "none", request_id)

    def notify(self) -> Message:
        """A message on the Home Assistant notify topic, with a Response Topic."""
        request_id = self.next_id()
        rid, topic, corr = request_id.encode(), DEV.ha_notify.value, request_id.encode()
        roll = self.rng.randrange(12)
        if roll < 3 and self.notify_speaks < NOTIFY_SPEAKS:
            self.notify_speaks += 1
            if roll == 0:
                body = _json({"id": request_id, "text": self.rng.choice(SENTENCES)})
                return Message(topic, body, "id", request_id, None, corr, "finished")
            text = self.rng.choice(SPOKEN_NOTIFY).encode()
            return Message(topic, text, "anon", None, None, corr, "finished")
        deep = self.rng.randint(201, 20_000)
        if roll < 7:
            payload = self.rng.choice((
                b'["an", "array"]', b'[{"id": "zz"}]', b"[" * deep + b"]" * deep, b"[]",
                ("a" * 5_001).encode(), b"caf\xe9 \xff", b"", b"  \n\t ", b"Hello\x00 there",
                b'{"text": "\\ud800"}', b'{"text": 5}', b'{"text": "a", "colour": 1}',
                b"{not json", b'{"inner": {"id": "fz-inner"}, "text": 7}', b"{}"))
            if roll == 6 and self.notify_oversize < NOTIFY_OVERSIZE:
                self.notify_oversize += 1
                payload = b"x" * (MAX_PAYLOAD + 10)
            return Message(topic, payload, "anon", None, None, corr, "rejected")
        payload = self.rng.choice((
            b'{"id": "' + rid + b'", "text": "x", "x": ' + b"{\"a\":" * deep + b"0"
            + b"}" * deep + b"}",
            b'{"id": "' + rid + b'", "text": "caf\xe9"}',
            _json({"id": request_id, "text": ""}),
            _json({"id": request_id, "text": "a", "priority": "loudest"}),
            _json({"id": request_id, "text": "a", "volume": [1]}),
            b'{"id": "' + rid + b'", "text": "a", "n": ' + b"9" * 5_000 + b"}"))
        return Message(topic, payload, "id", request_id, None, corr, "rejected")

    def notify_phase(self, count: int) -> list[Message]:
        """Notify messages with a ping now and then (nothing that stops or preempts)."""
        out: list[Message] = []
        for _ in range(count):
            if self.rng.random() < 0.1:
                request_id = self.next_id()
                out.append(Message(DEV.command("ping").value, _json({"id": request_id}), "id",
                                   request_id))
            else:
                out.append(self.notify())
        return out

    def messages(self, count: int) -> list[Message]:
        out: list[Message] = []
        for _ in range(count):
            roll = self.rng.random()
            if roll < 0.01 and self.speaks < SPEAKS:
                out.append(self.speak())
            elif roll < 0.25:
                out.append(self.valid())
            elif roll < 0.60:
                out.append(self.hostile_with_id())
            elif roll < 0.80:
                out.append(self.hostile_anonymous())
            elif roll < 0.95:
                out.append(self.hermes())
            else:
                out.append(self.elsewhere())
        return out


class Finals:
    """Counts final events by id on the device's events topic, and Hermes answers."""

    def __init__(self, broker: Broker) -> None:
        self._cond = threading.Condition()
        self.finals: Counter[str] = Counter()
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.say_finished: Counter[str] = Counter()
        self.replies: dict[bytes, list[str]] = {}
        self.hermes_errors = 0
        self.online = False
        filters = [DEV.events.as_filter(), DEV.status.as_filter(),
                   HERMES_SAY_FINISHED.as_filter(), HERMES_ERROR.as_filter(),
                   REPLY.as_filter()]
        self.client = MqttClient(broker.settings(), "fuzz-controller", subscriptions=filters,
                                 on_message=self._record, persistent=False)

    def _record(self, message: InboundMessage) -> None:
        data = json.loads(message.payload) if message.payload else {}
        with self._cond:
            if message.topic == DEV.events and data.get("final"):
                self.finals[data["id"]] += 1
                self.events.setdefault(data["id"], []).append(data)
            elif message.topic == REPLY:
                self.replies.setdefault(message.correlation_data or b"", []).append(
                    str(data.get("event")))
            elif message.topic == HERMES_SAY_FINISHED:
                self.say_finished[str(data.get("id"))] += 1
            elif message.topic == HERMES_ERROR:
                self.hermes_errors += 1
            elif message.topic == DEV.status:
                self.online = data.get("state") == "online"
            self._cond.notify_all()

    def anonymous(self) -> int:
        """Finals under ids the fuzz did not send (generated by the agent)."""
        return sum(n for request_id, n in self.finals.items() if not request_id.startswith("fz-"))

    def answered(self, ids: list[str], anonymous: int, says: list[str],
                 replies: list[bytes]) -> bool:
        """Whether each of ``ids`` has a final, ``anonymous`` finals came under generated ids,
        each of ``says`` has its ``sayFinished`` and each of ``replies`` its answer on the
        Response Topic (caller holds the condition)."""
        return (all(self.finals[i] for i in ids) and self.anonymous() >= anonymous
                and all(self.say_finished[s] for s in says)
                and all(r in self.replies for r in replies))

    def wait(self, done: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self._cond.wait(remaining)

    def __enter__(self) -> Finals:
        self.client.start()
        if not self.client.wait_ready(10):
            raise RuntimeError(f"controller could not connect: {self.client.last_error}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close(timeout=3)


@pytest.fixture()
def settings(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Settings:
    return agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                          mqtt={"groups": [GROUP], "max_payload_bytes": MAX_PAYLOAD,
                                "ha_discovery": True})


@pytest.fixture()
def agent_log(settings: Settings, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log_path = tmp_path / "agent.log"
    with daemon(settings, log_path) as process:
        yield process, log_path


def _send(messages: list[Message], finals: Finals, raw: RawPublisher) -> None:
    """Publish in windows; after each, wait until every answer it must get has come."""
    expected_anon = 0
    for start in range(0, len(messages), WINDOW):
        window = messages[start:start + WINDOW]
        for message in window:
            raw.publish(message.topic, message.payload, correlation=message.correlation,
                        response_topic=None if message.correlation is None else REPLY.value)
        expected_anon += sum(1 for m in window if m.expect == "anon")
        ids = [m.request_id for m in window if m.expect == "id" and m.request_id]
        says = [m.say_id for m in window if m.say_id is not None]
        replies = [m.correlation for m in window if m.correlation is not None]
        finals.wait(partial(finals.answered, ids, expected_anon, says, replies),
                    f"the answers to messages {start}-{start + len(window)}")


@pytest.mark.slow
def test_every_message_on_a_command_topic_gets_exactly_one_final(
        mqtt_broker: Broker, agent_log: tuple[subprocess.Popen[bytes], Path]) -> None:
    process, log_path = agent_log
    fuzz = Fuzz(SEED)
    messages = fuzz.messages(MESSAGES) + fuzz.notify_phase(NOTIFY)
    kinds = Counter(m.expect for m in messages)
    assert kinds["anon"] > 100 and kinds["id"] > 1_000 and kinds["none"] > 10  # a real mix
    notify = {m.correlation: m.reply for m in messages if m.correlation is not None}
    assert Counter(notify.values())["finished"] == NOTIFY_SPEAKS, Counter(notify.values())
    with Finals(mqtt_broker) as finals, RawPublisher(mqtt_broker, "fuzzer") as raw:
        finals.wait(lambda: finals.online, "the agent to come online", timeout=60)
        _send(messages, finals, raw)
        raw.publish(DEV.command("speak").value, _json({"id": "fz-last", "text": "Still here."}))
        finals.wait(lambda: finals.finals["fz-last"] >= 1, "the last speak")
        raw.publish(DEV.command("ping").value, _json({"id": "fz-barrier"}))
        finals.wait(lambda: finals.finals["fz-barrier"] >= 1, "the barrier")
        assert finals.events["fz-last"][0]["event"] == "finished", finals.events["fz-last"]
        assert process.poll() is None, "the agent died"
        with_id = [m.request_id for m in messages if m.expect == "id" and m.request_id]
        repeated = {i: finals.finals[i] for i in with_id if finals.finals[i] != 1}
        assert not repeated, f"not exactly one final: {repeated}"
        ignored = [m.request_id for m in messages if m.expect == "none" and m.request_id]
        assert not [i for i in ignored if finals.finals[i] or finals.say_finished[i]]
        assert finals.anonymous() == kinds["anon"]
        say_ids = Counter(m.say_id for m in messages if m.say_id is not None)
        assert {s: finals.say_finished[s] for s in say_ids} == dict(say_ids)
        assert finals.hermes_errors >= 1
        answers = {c: finals.replies.get(c) for c in notify}
        wrong = {c: a for c, a in answers.items() if a != [notify[c]]}
        assert not wrong, f"{len(wrong)} notify answers not as expected: {list(wrong.items())[:10]}"
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    log = log_path.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, log[-4_000:]
    errors = [line for line in log.splitlines() if re.search(r"\[(error|critical)", line)]
    assert not errors, errors[:10]
