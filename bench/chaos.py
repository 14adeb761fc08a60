"""The delivery contract under chaos: broker restarts and an agent SIGKILL with QoS 1 commands in
flight; what was lost, answered twice or spoken twice, and how long each reconnect took.

    .venv/bin/python bench/chaos.py [--quick] [--restarts 20] [--kills 1] [--burst 30]
        [--models models] [--voice en_US-joe-medium] [--replay] [--json OUT]

It starts its own Mosquitto on a free loopback port (persistence on, restarted on the same port
with SIGTERM, as a production broker keeps sessions and queued messages) and the agent as a
process (``python -m agent run``, default settings but for the broker, the voice, an ALSA
``file`` PCM sink, ``mqtt.ha_discovery`` and a Wyoming server on a loopback port). A controller
(plain paho, MQTT 5, QoS 1, persistent session, a unique id per
command) keeps sending short speak commands and pings, and now and then resends an id on
purpose, and Home Assistant notify messages (plain text, and ``speak`` objects with an id),
each with a Response Topic and Correlation Data. Meanwhile the broker is restarted
``--restarts`` times (one of them stays down ``--long-down-s``), and ``--kills`` times a burst
of speak commands is queued, the agent is SIGKILLed once they are accepted, and started again
on the same cache directory; once it is back, a speak command that had finished before the
kill is resent.

Per command id it counts: sent, accepted, finals, lost (never a final by the end, after a
settle period), duplicated finals (more finals than the id was sent; a ``duplicate`` answer to
a deliberate resend is the answer to that resend, not a duplicate), spoken twice (two
``started`` for one id, or a ``finished`` after a ``duplicate``), and, for the requests accepted
and unfinished when the agent died, how many were answered after its restart. The reconnect
gap is from the broker listening again to the first message from the agent created after the
broker went down (its retained ``online``, or any event); the controller reconnects within
0.2 s itself, so the gap can be over-stated by that much, never under-stated. Events are QoS 1
too: a copy of an event already received (same id, event and ``ts``) is counted apart, not as
a second final. A notify message is counted by its answers on its Response Topic (the contract
answers it there): lost (none), or answered more than once (plain text has no id, so a QoS 1
redelivery is a new message, spoken again, as the contract says). Wyoming clients
(``bench/chaos_wyoming.py``) connect, synthesize, stream, leave mid-stream and never read,
through the restarts and the kill: their requests completed, errors with their codes, cuts by
the kill, and connections left hanging. Exit status 0 unless the bench itself broke; the
figures say the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import pwd
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import paho.mqtt.client as paho
from chaos_wyoming import HANG_S, WyomingLoad, summary
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from results import Figures, add_json_option, write_result
from workload import ROOT, VOICE

DEVICE = "chaos"
WAIT_S = 90.0
"""Upper bound on waiting for the agent (start, reconnect, accepts); reaching it is a figure."""
TEXTS = ("Doors closing.", "Mind the gap.", "Platform two.", "Next stop, airport.",
         "Please stand clear.", "Thank you.")
BURST_TEXT = "Train number {n} to the airport leaves from platform two in a few minutes."
RESEND_EVERY = 7
"""Every this many speak commands, one sent a few commands earlier is resent on purpose."""
PING_EVERY = 4
NOTIFY_EVERY = 5
"""Every this many commands (not a ping), a Home Assistant notify message instead of a speak."""
KILL_WINDOW_S = 1.0
WYOMING_CLIENTS = 4
WRITE_TIMEOUT_S = 2.0


class Broker:
    """Mosquitto on one loopback port, with persistence, restartable."""

    def __init__(self, work: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.conf = work / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n"
            f"persistence true\npersistence_location {work}/\nmax_queued_messages 100000\n"
            f"user {pwd.getpwuid(os.getuid()).pw_name}\n", encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start it; the monotonic time at which it accepts connections."""
        self.process = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(self.conf)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return time.monotonic()
            except OSError:
                threading.Event().wait(0.01)
        raise SystemExit("mosquitto did not start")

    def stop(self) -> None:
        """SIGTERM (Mosquitto saves sessions and queued messages) and wait."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)
        self.process = None


class Ledger:
    """What the controller sent and what came back, per id (thread-safe)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.sent: dict[str, str] = {}            # id -> command
        self.sent_at: dict[str, float] = {}       # id -> wall time of its first send
        self.bodies: dict[str, dict[str, Any]] = {}
        self.resends: Counter[str] = Counter()
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.copies = 0                           # QoS 1 copies of an event already received
        self.agent_messages: list[tuple[float, float, str]] = []  # (arrival, ts, what)
        self.published = 0                        # commands sent
        self.acknowledged = 0                     # PUBACKs the controller got for them
        self.notify_sent: dict[str, str] = {}     # correlation -> "text" or "speak"
        self.replies: dict[str, list[dict[str, Any]]] = {}  # correlation -> finals there
        self.reply_copies = 0
        self.reply_topic = ""

    def on_message(self, message: paho.MQTTMessage) -> None:
        arrival = time.monotonic()
        try:
            body = json.loads(message.payload)
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        with self.cond:
            if message.topic == self.reply_topic:
                properties = getattr(message, "properties", None)
                raw = getattr(properties, "CorrelationData", b"") or b""
                seen = self.replies.setdefault(raw.decode(errors="replace"), [])
                if any(e.get("id") == body.get("id") and e.get("event") == body.get("event")
                       and e.get("ts") == body.get("ts") for e in seen):
                    self.reply_copies += 1
                else:
                    seen.append(body)
            elif message.topic.endswith("/status"):
                if body.get("state") == "online":
                    self.agent_messages.append((arrival, float(body.get("ts") or 0), "online"))
            elif isinstance(body.get("id"), str):
                self.agent_messages.append((arrival, float(body.get("ts") or 0), "event"))
                seen = self.events.setdefault(body["id"], [])
                if any(e["event"] == body.get("event") and e["ts"] == body.get("ts")
                       for e in seen):
                    self.copies += 1
                else:
                    seen.append({**body, "arrival": arrival})
            self.cond.notify_all()

    def agent_since(self, wall: float, timeout: float) -> float | None:
        """Arrival (monotonic) of the first message the agent created at or after ``wall``."""
        def first() -> float | None:
            return min((a for a, ts, _ in self.agent_messages if ts >= wall), default=None)
        with self.cond:
            self.cond.wait_for(lambda: first() is not None, timeout)
            return first()

    def online_since(self, wall: float, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: any(
                what == "online" and ts >= wall for _, ts, what in self.agent_messages), timeout)

    def has(self, request_id: str, event: str) -> bool:
        return any(e["event"] == event for e in self.events.get(request_id, []))

    def finals(self, request_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events.get(request_id, []) if e.get("final")]

    def wait(self, ids: list[str], done: Any, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: all(done(i) for i in ids), timeout)


class Controller:
    """Plain paho, MQTT 5, persistent session, QoS 1: sends commands and records the answers."""

    def __init__(self, port: int, ledger: Ledger, run: str, period_s: float) -> None:
        self.ledger = ledger
        self.run = run
        self.prefix = f"tts/{DEVICE}"
        self.reply_topic = ledger.reply_topic = f"tts/reply/chaos-{run}"
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"chaos-ctl-{run}",
                                  protocol=paho.MQTTv5)
        self.client.reconnect_delay_set(0.05, 0.2)  # type: ignore[arg-type]  # seconds, floats work
        self.client.on_connect = self._connected
        self.client.on_publish = self._acknowledged
        self.client.on_message = lambda _c, _u, message: ledger.on_message(message)
        self.connected = threading.Event()
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = 3600
        self.client.connect_async("127.0.0.1", port, keepalive=10, clean_start=False,
                                  properties=properties)
        self.counter = itertools.count()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._traffic, args=(period_s,),
                                       name="chaos-traffic", daemon=True)

    def _connected(self, client: paho.Client, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            return
        if not flags.session_present:  # a restored session keeps its subscriptions (and a
            # new subscription would bring back the retained status of before)
            client.subscribe([(f"{self.prefix}/events", 1), (f"{self.prefix}/status", 1),
                              (self.reply_topic, 1)])
        self.connected.set()

    def send(self, command: str, request_id: str, body: dict[str, Any]) -> None:
        with self.ledger.cond:
            if request_id in self.ledger.sent:
                self.ledger.resends[request_id] += 1
            self.ledger.sent_at.setdefault(request_id, time.time())
            self.ledger.sent[request_id] = command
            self.ledger.bodies[request_id] = body
        payload = json.dumps({"id": request_id, **body})
        self.client.publish(f"{self.prefix}/cmd/{command}", payload, qos=1)  # paho queues it
        with self.ledger.cond:                                                # while away
            self.ledger.published += 1

    def notify(self, key: str, payload: str, form: str) -> None:
        """A notify message with a Response Topic and ``key`` as its Correlation Data; a
        ``speak`` object (``key`` its id too) is also counted by id, like a speak command."""
        with self.ledger.cond:
            self.ledger.notify_sent[key] = form
            self.ledger.sent_at.setdefault(key, time.time())
            if form == "speak":
                self.ledger.sent[key] = "notify"
                self.ledger.bodies[key] = json.loads(payload)
        properties = Properties(PacketTypes.PUBLISH)
        properties.ResponseTopic = self.reply_topic
        properties.CorrelationData = key.encode()
        self.client.publish(f"{self.prefix}/ha/notify", payload, qos=1, properties=properties)
        with self.ledger.cond:
            self.ledger.published += 1

    def _acknowledged(self, *_: Any) -> None:
        with self.ledger.cond:
            self.ledger.acknowledged += 1

    def _traffic(self, period_s: float) -> None:
        """A speak every ``period_s`` (a ping instead every PING_EVERY-th), and a resend."""
        speaks: list[tuple[str, str]] = []
        while not self.stop.wait(period_s):
            n = next(self.counter)
            if n % PING_EVERY == PING_EVERY - 1:
                self.send("ping", f"{self.run}-p{n}", {})
                continue
            request_id, text = f"{self.run}-s{n}", f"{TEXTS[n % len(TEXTS)]} {n}."
            if n % NOTIFY_EVERY == NOTIFY_EVERY - 2:
                if n % 2:
                    self.notify(f"{self.run}-t{n}", text, "text")
                else:
                    key = f"{self.run}-h{n}"
                    self.notify(key, json.dumps({"id": key, "text": text}), "speak")
                continue
            self.send("speak", request_id, {"text": text})
            speaks.append((request_id, text))
            if len(speaks) % RESEND_EVERY == 0:
                old_id, old_text = speaks[-4]
                self.send("speak", old_id, {"text": old_text})


class Agent:
    """``python -m agent run`` as a process of its own (its own process group)."""

    def __init__(self, work: Path, port: int, wyoming_port: int, args: argparse.Namespace
                 ) -> None:
        self.wyoming_port = wyoming_port
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
        self.env.update({
            "TTS_AGENT_DEVICE_ID": DEVICE, "TTS_AGENT_MQTT__HOST": "127.0.0.1",
            "TTS_AGENT_MQTT__PORT": str(port), "TTS_AGENT_MODELS__DIR": str(args.models),
            "TTS_AGENT_MODELS__DEFAULT_VOICE": args.voice, "TTS_AGENT_MODELS__WATCH": "false",
            "TTS_AGENT_AUDIO__DEVICE": f"file:'{work / 'out.raw'}',raw",
            "TTS_AGENT_CACHE__DIR": str(work / "cache"), "TTS_AGENT_LOG__LEVEL": "warning",
            "TTS_AGENT_LOG__FORMAT": "console", "TTS_AGENT_MQTT__HA_DISCOVERY": "true",
            "TTS_AGENT_WYOMING__URI": f"tcp://127.0.0.1:{wyoming_port}",
            "TTS_AGENT_WYOMING__WRITE_TIMEOUT_S": str(WRITE_TIMEOUT_S),
        })
        self.env.pop("NOTIFY_SOCKET", None)
        if args.replay:
            self.env["TTS_AGENT_MQTT__JOURNAL__REPLAY"] = "true"
        self.work = work
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start it; the wall-clock time of the start."""
        self.starts += 1
        started = time.time()
        with (self.work / f"agent-{self.starts}.log").open("wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "agent", "run"], env=self.env,
                                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        return started

    def end(self, sig: signal.Signals) -> int | None:
        """Send ``sig``, wait, then kill what is left of its process group (as systemd's
        control-group kill would, e.g. the PCM helper)."""
        if self.process is None:
            return None
        self.process.send_signal(sig)
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None
        return code

    def tracebacks(self) -> int:
        return sum(path.read_text(encoding="utf-8", errors="replace").count("Traceback")
                   for path in self.work.glob("agent-*.log"))


def crash(controller: Controller, agent: Agent, ledger: Ledger, kill: int, burst: int
          ) -> dict[str, Any]:
    """Queue ``burst`` speak commands, SIGKILL the agent once they are accepted, start it
    again; the ids that were accepted and unfinished when it died. Once it is back, a speak
    command that had finished before the kill is resent (a controller retrying after it saw
    the agent go offline): the probe of whether a repeat across a restart is spoken again."""
    with ledger.cond:
        probe = next((i for i in reversed(ledger.sent) if ledger.sent[i] == "speak"
                      and ledger.has(i, "finished") and not ledger.resends[i]), None)
    ids = [f"{controller.run}-k{kill}-{n}" for n in range(burst)]
    for n, request_id in enumerate(ids):
        controller.send("speak", request_id, {"text": BURST_TEXT.format(n=n + 1)})
    all_in = ledger.wait(ids, lambda i: ledger.has(i, "accepted") or ledger.finals(i), WAIT_S)
    killed = time.time()
    code = agent.end(signal.SIGKILL)
    threading.Event().wait(0.5)  # what the agent wrote before it died reaches the controller
    with ledger.cond:
        pending = [i for i, command in ledger.sent.items() if command in ("speak", "notify")
                   and ledger.has(i, "accepted") and not ledger.finals(i)]
    restarted = agent.start()
    online = ledger.online_since(restarted, WAIT_S)
    if probe is not None:
        controller.send("speak", probe, ledger.bodies[probe])
    return {"burst_accepted_before_kill": all_in, "exit_code": code, "pending": pending,
            "online_again": online, "killed_at": killed, "restarted_at": restarted,
            "probe": probe}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    broker, ledger, token = Broker(work), Ledger(), uuid.uuid4().hex[:6]
    broker.start()
    controller = Controller(broker.port, ledger, token, args.period_s)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        wyoming_port = int(sock.getsockname()[1])
    agent = Agent(work, broker.port, wyoming_port, args)
    wyoming = WyomingLoad(wyoming_port, WYOMING_CLIENTS, WRITE_TIMEOUT_S)
    controller.client.loop_start()
    try:
        if not controller.connected.wait(10):
            raise SystemExit("the controller could not connect")
        if not ledger.online_since(agent.start(), WAIT_S):
            raise SystemExit("the agent did not come online")
        controller.thread.start()
        wyoming.start()
        outcome = chaos(args, broker, controller, agent)
        controller.stop.set()
        controller.thread.join(5)
        wyoming.stop()
        ids = list(ledger.sent)
        keys = list(ledger.notify_sent)
        outcome["settled"] = ledger.wait(ids, ledger.finals, args.settle_s) and ledger.wait(
            keys, lambda k: bool(ledger.replies.get(k)), args.settle_s)
        threading.Event().wait(2.0)  # a late second final would arrive now
        outcome["agent_exit"] = agent.end(signal.SIGTERM)
        outcome["tracebacks"] = agent.tracebacks()
        outcome["unacknowledged"] = ledger.published - ledger.acknowledged
    finally:
        controller.stop.set()
        agent.end(signal.SIGKILL)
        controller.client.loop_stop()
        broker.stop()
    kills = [c["killed_at"] for c in outcome["crashes"]]
    return outcome | count(ledger, outcome["crashes"]) | {
        "notify": count_notify(ledger), "wyoming": summary(wyoming.attempts, kills)}


def chaos(args: argparse.Namespace, broker: Broker, controller: Controller, agent: Agent
          ) -> dict[str, Any]:
    """The broker restarts, one of them ``long_down_s`` down, and the kills in between."""
    long_at = args.restarts // 2
    kill_after = {round((k + 1) * args.restarts / (args.kills + 1)) - 1 for k in range(args.kills)}
    gaps: list[dict[str, Any]] = []
    crashes: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.max_s
    for restart in range(args.restarts):
        if time.monotonic() > deadline:
            break
        threading.Event().wait(args.up_s)
        down_s = args.long_down_s if restart == long_at else args.down_s
        broker.stop()
        went_down = time.time()  # anything the agent made from now on came after the restart
        threading.Event().wait(down_s)
        back = broker.start()
        arrival = controller.ledger.agent_since(went_down, WAIT_S)
        gaps.append({"down_s": down_s, "long": restart == long_at,
                     "gap_s": None if arrival is None else arrival - back})
        if restart in kill_after:
            threading.Event().wait(args.up_s)
            crashes.append(crash(controller, agent, controller.ledger, len(crashes), args.burst))
    return {"restarts": gaps, "crashes": crashes}


def count(ledger: Ledger, crashes: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-id counts of the contract."""
    sent = dict(ledger.sent)
    lost = [i for i in sent if not ledger.finals(i)]
    duplicated = [i for i in sent if len(ledger.finals(i)) > 1 + ledger.resends[i]]
    # Each send is answered by a final of its own or, a repeat while the original is open, by
    # in_progress (the original's final answers both).
    unanswered = sum(max(0, 1 + ledger.resends[i] - len(ledger.finals(i))
                         - sum(e["event"] == "in_progress" for e in ledger.events.get(i, [])))
                     for i in sent)
    twice = [i for i in sent if spoken_twice(ledger.events.get(i, []))]
    kills = [c["killed_at"] for c in crashes]
    at_kill = [i for i in lost if not ledger.events.get(i) and any(
        kill - KILL_WINDOW_S <= ledger.sent_at.get(i, 0) <= kill for kill in kills)]
    across = [i for i in twice if straddles(ledger.events[i], kills)]
    repeats = [i for i in duplicated if all(e["event"] == "duplicate"
                                            for e in ledger.finals(i)[1:])]
    probes = [c["probe"] for c in crashes if c["probe"] is not None]
    pongs = [e for i in sent for e in ledger.events.get(i, []) if e["event"] == "pong"]
    pending = [i for c in crashes for i in c["pending"]]
    answered = {i: after[0] for c in crashes for i in c["pending"]  # its first final since
                if (after := [e for e in ledger.finals(i) if e["ts"] >= c["restarted_at"]])}
    finals = Counter(e["event"] for i in sent for e in ledger.finals(i))
    after_crash = Counter(f"{e['event']}: {e.get('reason')}" for e in answered.values())
    rejected = Counter(str(e.get("reason")).split(":")[0] for i in sent
                       for e in ledger.finals(i) if e["event"] == "rejected")
    return {
        "sent": len(sent), "speak": sum(c == "speak" for c in sent.values()),
        "ping": sum(c == "ping" for c in sent.values()),
        "resends": sum(ledger.resends.values()),
        "accepted": sum(ledger.has(i, "accepted") for i in sent),
        "with_final": len(sent) - len(lost), "lost": lost, "lost_at_kill": at_kill,
        "duplicated": duplicated,
        "duplicated_repeat_answers": repeats, "spoken_twice_across_restart": across,
        "probes": len(probes), "probes_spoken_again": [i for i in probes if i in twice],
        "unanswered": unanswered, "in_progress": sum(
            e["event"] == "in_progress" for i in sent for e in ledger.events.get(i, [])),
        "max_pending": max((int(e.get("status", {}).get("pending", 0)) for e in pongs),
                           default=None),
        "spoken_twice": twice, "pending_at_kill": len(pending), "answered_after_crash":
        len(answered), "event_copies": ledger.copies, "finals_by_event": dict(finals),
        "after_crash_finals": dict(after_crash), "rejected_reasons": dict(rejected),
        "trails": {i: trail(ledger, i) for i in {*lost, *duplicated, *twice}},
    }


def count_notify(ledger: Ledger) -> dict[str, Any]:
    """The notify messages by their answers on the Response Topic."""
    sent = dict(ledger.notify_sent)
    replies = {k: ledger.replies.get(k, []) for k in sent}
    lost = [k for k, r in replies.items() if not r]
    repeated = [k for k, r in replies.items() if len(r) > 1]
    return {"sent": len(sent), "text": sum(f == "text" for f in sent.values()),
            "speak": sum(f == "speak" for f in sent.values()),
            "answered": len(sent) - len(lost), "lost": lost,
            "answered_twice": [k for k in repeated if sent[k] == "speak"],
            "text_answered_twice": [k for k in repeated if sent[k] == "text"],
            "reply_copies": ledger.reply_copies,
            "finals_by_event": dict(Counter(e["event"] for r in replies.values() for e in r)),
            "trails": {k: replies[k] for k in repeated}}


def straddles(events: list[dict[str, Any]], kills: list[float]) -> bool:
    """Whether two of the id's ``started`` events lie on either side of an agent kill."""
    started = [e["ts"] for e in events if e["event"] == "started"]
    return any(min(started) < kill < max(started) for kill in kills) if started else False


def trail(ledger: Ledger, request_id: str) -> dict[str, Any]:
    """What came back for one id, in arrival order (for the ids a figure counts against)."""
    events = sorted(ledger.events.get(request_id, []), key=lambda e: e["arrival"])
    return {"sends": 1 + ledger.resends[request_id],
            "events": [{k: e.get(k) for k in ("event", "ts", "reason", "outcome", "replayed")
                        if e.get(k) is not None} for e in events]}


def spoken_twice(events: list[dict[str, Any]]) -> bool:
    """Two ``started`` for one id, or a ``finished`` that arrived after a ``duplicate``."""
    names = [e["event"] for e in sorted(events, key=lambda e: e["arrival"])]
    duplicate_at = names.index("duplicate") if "duplicate" in names else len(names)
    return names.count("started") > 1 or "finished" in names[duplicate_at + 1:]


def record(result: dict[str, Any], args: argparse.Namespace) -> Figures:
    figures = Figures()
    every = [g["gap_s"] * 1000 for g in result["restarts"] if g["gap_s"] is not None]
    long_gap = next((g["gap_s"] for g in result["restarts"] if g["long"]), None)
    seen = sum(g["gap_s"] is not None for g in result["restarts"])
    counts = [
        ("sent", result["sent"],
         "commands sent (distinct ids: speak, ping, notify speak objects)"),
        ("resends", result["resends"], "deliberate resends of an id already sent"),
        ("accepted", result["accepted"], "speak ids that came back accepted"),
        ("with_final", result["with_final"], "ids that got a final event"),
        ("lost", len(result["lost"]), "ids sent that never got a final event"),
        ("lost_at_kill", len(result["lost_at_kill"]),
         f"of those, sent within {KILL_WINDOW_S:g} s before a kill and never heard of (read by "
         "the agent, not yet accepted: not guaranteed, mqtt-protocol.md)"),
        ("unanswered", result["unanswered"],
         "sends (resends included) answered neither by a final nor by in_progress"),
        ("in_progress", result["in_progress"],
         "in_progress answers (a resend while the original was open)"),
        ("duplicated", len(result["duplicated"]),
         "ids with more final events than times sent"),
        ("duplicated_repeat_answers", len(result["duplicated_repeat_answers"]),
         "of those, ids whose extra finals are all duplicate answers (a QoS 1 redelivery "
         "recognised as a repeat, not run again)"),
        ("spoken_twice", len(result["spoken_twice"]),
         "ids started twice, or finished after a duplicate answer"),
        ("spoken_twice_across_restart", len(result["spoken_twice_across_restart"]),
         "of those, ids started once before an agent kill and again after its restart"),
        ("probes", result["probes"],
         "speak ids finished before a kill and resent once the agent was back"),
        ("probes_spoken_again", len(result["probes_spoken_again"]),
         "of those, spoken again (the repeat memory did not survive the restart)"),
        ("pending_at_kill", result["pending_at_kill"],
         "speak ids accepted and unfinished when the agent was killed"),
        ("answered_after_crash", result["answered_after_crash"],
         "of those, answered with a final after the restart"),
        ("event_copies", result["event_copies"],
         "QoS 1 copies of an event already received (not counted as finals)"),
        ("max_pending", result["max_pending"], "most requests pending in any pong"),
        ("tracebacks", result["tracebacks"], "tracebacks in the agent's logs")]
    rows: list[list[str | None]] = [[what, figures.add(key, value, "", what)]
                                    for key, value, what in counts]
    figures.table("Per command id", ["", "count"], rows)
    gaps = [
        ["reconnects observed", figures.add("reconnects", seen, "",
                                            f"restarts (of {len(result['restarts'])}) after "
                                            "which the agent was heard from again")],
        ["median", figures.add("gap_p50", statistics.median(every) if every else None, "ms",
                               "broker back -> agent heard from, median over the restarts")],
        ["max", figures.add("gap_max", max(every) if every else None, "ms",
                            "broker back -> agent heard from, max over the restarts")],
        [f"after a {args.long_down_s:g} s outage",
         figures.add("gap_long", None if long_gap is None else long_gap * 1000, "ms",
                     f"broker back -> agent heard from, after {args.long_down_s:g} s down")]]
    figures.table("Reconnect gap after a broker restart", ["", "value"], gaps)
    record_doors(figures, result)
    targets(figures, result, long_gap)
    return figures


def record_doors(figures: Figures, result: dict[str, Any]) -> None:
    """The Home Assistant notify messages and the Wyoming clients."""
    notify = result["notify"]
    rows: list[list[str | None]] = [[what, figures.add(f"notify.{key}", value, "", what)]
                                    for key, value, what in (
        ("sent", notify["sent"], "notify messages sent, each with a Response Topic"),
        ("text", notify["text"], "of those, plain text"),
        ("speak", notify["speak"], "of those, speak objects with an id"),
        ("answered", notify["answered"], "answered on their Response Topic"),
        ("lost", len(notify["lost"]), "never answered there"),
        ("answered_twice", len(notify["answered_twice"]),
         "speak objects answered more than once there"),
        ("text_answered_twice", len(notify["text_answered_twice"]),
         "plain text answered more than once (a QoS 1 redelivery: no id, a new message)"))]
    figures.table("Home Assistant notify", ["", "count"], rows)
    rows = []
    wyoming = result["wyoming"]
    outcomes = wyoming["outcomes"]
    errors = sum(wyoming["errors"].values())
    codes = ", ".join(f"{code} {n}" for code, n in sorted(wyoming["errors"].items()))
    rows += [[what, figures.add(f"wyoming.{key}", value, "", what)]
             for key, value, what in (
        ("attempts", wyoming["attempts"], "Wyoming connections attempted"),
        ("completed", outcomes.get("completed", 0), "requests completed (audio to its end)"),
        ("errors", errors, "answered with an error event"),
        ("left", outcomes.get("left", 0), "clients that left after the first audio"),
        ("dropped", outcomes.get("dropped", 0), "clients that never read, dropped by the agent"),
        ("cut_by_kill", outcomes.get("cut by a kill", 0),
         "closed with no error and no end around an agent kill"),
        ("hanging_by_kill", outcomes.get("hanging by a kill", 0),
         "never-readers still open around an agent kill (the killed process's socket)"),
        ("cut", outcomes.get("cut", 0), "closed with no error and no end otherwise"),
        ("connect_failed", outcomes.get("connect failed", 0),
         "connects refused (the agent was down)"),
        ("hanging", outcomes.get("hanging", 0),
         f"connections left hanging (no event, no close for {HANG_S:g} s)"))]
    figures.table("Wyoming clients", ["", "count"], rows,
                  note=f"error codes: {codes}" if codes else "")


def targets(figures: Figures, result: dict[str, Any], long_gap: float | None) -> None:
    wyoming = result["wyoming"]["outcomes"]
    checks = [
        ("0 lost", not result["lost"] and not result["unanswered"]),
        ("0 spoken twice", not result["spoken_twice"]),
        ("every accepted command answered after a crash",
         result["answered_after_crash"] == result["pending_at_kill"]),
        ("reconnect gap after the long outage under 5 s",
         long_gap is not None and long_gap < 5.0),
        ("every notify message answered on its Response Topic",
         not result["notify"]["lost"] and not result["notify"]["answered_twice"]),
        ("0 Wyoming connections left hanging or cut outside a kill",
         not wyoming.get("hanging") and not wyoming.get("cut"))]
    rows: list[list[str | None]] = [
        [label, figures.add(f"target.{n}", met, "", f"target met: {label}")]
        for n, (label, met) in enumerate(checks)]
    figures.table("Targets", ["target", "met"], rows)
    for label, met in checks:
        print(f"  target {label}: {'met' if met else 'NOT MET'}")


def report(result: dict[str, Any]) -> None:
    gaps = [g["gap_s"] for g in result["restarts"]]
    print(f"sent {result['sent']} ids ({result['speak']} speak, {result['ping']} ping) + "
          f"{result['resends']} deliberate resends; accepted {result['accepted']}; "
          f"with a final {result['with_final']}")
    print(f"lost {len(result['lost'])}, unanswered sends {result['unanswered']}, in_progress "
          f"{result['in_progress']}, most pending {result['max_pending']}")
    print(f"duplicated finals {len(result['duplicated'])} (repeat answers "
          f"{len(result['duplicated_repeat_answers'])}), spoken twice "
          f"{len(result['spoken_twice'])} (across a restart "
          f"{len(result['spoken_twice_across_restart'])}; resent after a restart "
          f"{len(result['probes_spoken_again'])} of {result['probes']}), QoS 1 event copies "
          f"{result['event_copies']}, tracebacks {result['tracebacks']}")
    print(f"accepted and unfinished at the kill {result['pending_at_kill']}, answered after "
          f"the restart {result['answered_after_crash']}: {result['after_crash_finals']}")
    print("reconnect gaps (s): " + ", ".join("-" if g is None else f"{g:.2f}" for g in gaps))
    print(f"finals {result['finals_by_event']}; rejected {result['rejected_reasons']}")
    notify = result["notify"]
    print(f"notify: sent {notify['sent']}, answered {notify['answered']}, lost "
          f"{len(notify['lost'])}, answered twice {len(notify['answered_twice'])} (plain text "
          f"{len(notify['text_answered_twice'])}): {notify['finals_by_event']}")
    print(f"wyoming: {result['wyoming']['attempts']} attempts: {result['wyoming']['outcomes']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 restarts, a burst of 10")
    parser.add_argument("--restarts", type=int, default=20, help="broker restarts")
    parser.add_argument("--kills", type=int, default=1, help="agent SIGKILLs with a queue")
    parser.add_argument("--burst", type=int, default=30, help="speak commands queued per kill")
    parser.add_argument("--period-s", type=float, default=0.3, help="between two commands")
    parser.add_argument("--up-s", type=float, default=3.0, help="broker up between restarts")
    parser.add_argument("--down-s", type=float, default=0.0, help="broker down per restart")
    parser.add_argument("--long-down-s", type=float, default=2.0, help="the one long outage")
    parser.add_argument("--settle-s", type=float, default=120.0, help="wait for late finals")
    parser.add_argument("--max-s", type=float, default=900.0, help="no restart after this")
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    parser.add_argument("--voice", default=VOICE)
    parser.add_argument("--replay", action="store_true", help="mqtt.journal.replay = true")
    add_json_option(parser, "chaos")
    args = parser.parse_args()
    if args.quick:
        args.restarts, args.burst = min(args.restarts, 5), min(args.burst, 10)
    with TemporaryDirectory(prefix="tts-chaos-") as tmp:
        result = run(args, Path(tmp))
    report(result)
    figures = record(result, args)
    write_result("chaos", figures, args, raw=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
