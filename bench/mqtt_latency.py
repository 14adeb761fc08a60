"""MQTT command-channel figures with real synthesis and real playback into an ALSA file sink.

* publish -> ``accepted``: network + intake + dispatch (what a controller waits for);
* publish -> ``started``: the first audio frame written to the ALSA device, for texts said for
  the first time (synthesized) and for an announcement repeated (played from the phrase cache);
* intake rate: a burst of queued speak commands, how many per second come back ``accepted``,
  and whether every one of them reaches a final event (none lost, none duplicated);
* beside the MQTT figures, in the same run and the same agent: its Wyoming server
  (``wyoming.uri``, :mod:`agent.wyoming`), ``synthesize`` -> first ``audio-chunk`` received by
  a client of the ``wyoming`` library, for new texts and for a repeated phrase (phrase cache).

It starts its own Mosquitto on a free loopback port (``/usr/sbin/mosquitto``) and runs the agent
in this process, playing into ``file:'<tmp>/out.raw',raw``.

    .venv/bin/python bench/mqtt_latency.py [--runs 20] [--burst 200] [--models models]
        [--voice en_US-joe-medium] [--text "..."] [--json OUT]

The tiny test voice works too (``--models DIR --voice tiny-test``) to measure the channel alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results import Figures, add_json_option, write_result  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.tts import Synthesize  # noqa: E402

from agent.daemon.service import AgentService  # noqa: E402
from agent.logs import configure_logging  # noqa: E402
from agent.mqtt.client import InboundMessage, MqttClient, OutboundMessage  # noqa: E402
from agent.mqtt.topics import Namespace  # noqa: E402
from agent.settings import MqttSettings, Settings  # noqa: E402

DEVICE = "bench"


def start_broker(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    conf = work / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n"
                    f"max_queued_messages 100000\nuser {pwd.getpwuid(os.getuid()).pw_name}\n",
                    encoding="utf-8")
    process = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(conf)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, port
        except OSError:
            threading.Event().wait(0.05)
    process.kill()
    raise SystemExit("mosquitto did not start")


class Clock:
    """Receipt times of events, keyed by (id, event)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.cond = threading.Condition()

    def __call__(self, message: InboundMessage) -> None:
        event = json.loads(message.payload)
        key = (str(event.get("id")), str(event.get("event")))
        with self.cond:
            self.seen.setdefault(key, message.received)
            self.counts[key] = self.counts.get(key, 0) + 1
            if event.get("final"):
                self.seen.setdefault((key[0], "final"), message.received)
                self.counts[(key[0], "final")] = self.counts.get((key[0], "final"), 0) + 1
            self.cond.notify_all()

    def wait(self, keys: list[tuple[str, str]], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: all(k in self.seen for k in keys), timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wyoming_first_audio(port: int, text: str) -> float:
    """``synthesize`` on a new connection (as Home Assistant makes one per request) -> first
    ``audio-chunk`` received (s); reads the audio to its ``audio-stop``."""
    async def go() -> float:
        sent, first = time.monotonic(), None
        async with AsyncTcpClient("127.0.0.1", port, read_timeout=120) as client:
            await client.write_event(Synthesize(text=text).event())
            while True:
                event = await client.read_event()
                if event is None or event.type == "error":
                    raise SystemExit(f"wyoming: {text!r}: {event}")
                if event.type == "audio-chunk" and first is None:
                    first = time.monotonic() - sent
                if event.type == "audio-stop" and first is not None:
                    return first
    return asyncio.run(go())


def summary(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    if not ms:
        return {}
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1),
            "max_ms": round(ms[-1], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="sequential latency samples")
    parser.add_argument("--burst", type=int, default=200, help="speak commands in the burst")
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    parser.add_argument("--voice", default="en_US-joe-medium")
    parser.add_argument("--text", default="The next train to the airport leaves from platform two.")
    add_json_option(parser, "mqtt_latency")
    args = parser.parse_args()
    configure_logging("warning", "console")

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mqtt-bench-") as tmp:
        work = Path(tmp)
        broker, port = start_broker(work)
        mqtt = MqttSettings(host="127.0.0.1", port=port, intake_queue=max(256, args.burst * 2))
        settings = Settings(
            device_id=DEVICE, mqtt=mqtt, cache={"dir": work / "cache"},
            models={"dir": args.models, "default_voice": args.voice, "watch": False},
            audio={"device": f"file:'{work / 'out.raw'}',raw",
                   "queue_max": max(32, args.burst * 2)},
            wyoming={"uri": f"tcp://127.0.0.1:{free_port()}"},
        )
        topics = Namespace(mqtt.topic_prefix).device(DEVICE)
        clock = Clock()
        agent = AgentService(settings)
        controller = MqttClient(mqtt, "bench-controller", subscriptions=[topics.events.as_filter()],
                                on_message=clock, persistent=False)
        try:
            agent.start()
            controller.start()
            if not controller.wait_ready(10) or agent.client is None \
                    or not agent.client.wait_ready(10):
                raise SystemExit("could not connect to the bench broker")
            addon: Any = agent.addons.get("wyoming")
            if addon is None or not addon.server.listening:
                raise SystemExit("the agent's Wyoming server is not listening")
            results = run(args, controller, topics.command("speak"), clock, addon.server.port)
        finally:
            controller.close(2)
            agent.stop(grace_s=1)
            broker.terminate()
            broker.wait(5)
            audio_bytes = (work / "out.raw").stat().st_size if (work / "out.raw").exists() else 0
    results.update(voice=args.voice, text_chars=len(args.text), audio_bytes=audio_bytes,
                   load_before=round(load_before, 2), load_after=round(os.getloadavg()[0], 2))
    print(json.dumps(results, indent=2))
    write_result("mqtt_latency", record(results), args, raw=results)
    return 0 if results["burst"]["lost"] == 0 and results["burst"]["duplicated"] == 0 else 1


LATENCIES = {"publish_to_accepted": "publish -> accepted",
             "publish_to_first_audio": "publish -> first audio frame, new text (synthesized)",
             "publish_to_first_audio_repeated_phrase":
                 "publish -> first audio frame, repeated phrase (phrase cache)",
             "wyoming_to_first_chunk":
                 "Wyoming synthesize -> first audio-chunk received, new text (synthesized)",
             "wyoming_to_first_chunk_repeated_phrase":
                 "Wyoming synthesize -> first audio-chunk received, repeated phrase (phrase "
                 "cache)"}


def record(results: dict[str, Any]) -> Figures:
    figures = Figures()
    rows: list[list[str | None]] = []
    for key, label in LATENCIES.items():
        rows.append(figures.latency_row(key, label, results[key]))
    figures.table("Command channel latency (MQTT and Wyoming, same run)",
                  ["", "median", "p95", "max", "samples"], rows)
    burst = results["burst"]
    labels = {"commands": "speak commands published at once", "accepted": "came back accepted",
              "rejected": "came back rejected", "finished": "finished",
              "lost": "never reached a final event", "duplicated": "more than one final event"}
    rows = [[label, figures.add(f"burst.{key}", burst[key], "", f"burst: {label}")]
            for key, label in labels.items()]
    rows.insert(1, ["intake rate", figures.add("burst.accepted_per_s", burst["accepted_per_s"],
                                               "/s", "burst: commands accepted per second")])
    figures.table("A burst of speak commands", ["", "value"], rows)
    figures.add("audio_bytes", results["audio_bytes"], "B", "bytes played into the ALSA file sink")
    # Other work on the machine slows every figure above alike (MQTT and Wyoming take turns).
    for key in ("load_before", "load_after"):
        if key in results:
            figures.add(key, results[key], "", f"1-minute load average {key.split('_')[1]} "
                        "the run (other processes on the machine)")
    return figures


def run(args: argparse.Namespace, controller: MqttClient, speak: Any, clock: Clock,
        wyoming_port: int) -> dict[str, Any]:
    def sample(request_id: str, text: str) -> tuple[float, float] | None:
        payload = json.dumps({"id": request_id, "text": text}).encode()
        sent = time.monotonic()
        controller.publish(OutboundMessage(speak, payload))
        if not clock.wait([(request_id, "final")], 120):
            raise SystemExit(f"{request_id}: no final event")
        if (request_id, "started") not in clock.seen:
            return None
        return (clock.seen[(request_id, "accepted")] - sent,
                clock.seen[(request_id, "started")] - sent)

    # Every text is new, so every one is synthesized (the phrase cache cannot answer). MQTT and
    # Wyoming take turns, each with every other number (odd and even alternating between them),
    # so both see texts of the same lengths.
    fresh, wyoming = [], []
    for n in range(args.runs):
        texts = [f"{args.text.rstrip('.')} number {2 * n + k}." for k in (1, 2)]
        mqtt_text, wyoming_text = texts if n % 2 == 0 else texts[::-1]
        fresh.append(sample(f"lat-{n}", mqtt_text))
        wyoming.append(wyoming_first_audio(wyoming_port, wyoming_text))
    accepted = [s[0] for s in fresh if s is not None]
    started = [s[1] for s in fresh if s is not None]
    # The same announcement again and again: after its first time both play it from the cache.
    sample("rep-0", args.text)
    repeated, wyoming_repeated = [], []
    for n in range(args.runs):
        if (s := sample(f"rep-{n + 1}", args.text)) is not None:
            repeated.append(s[1])
        wyoming_repeated.append(wyoming_first_audio(wyoming_port, args.text))

    ids = [f"burst-{n}" for n in range(args.burst)]
    sent = time.monotonic()
    for request_id in ids:
        payload = json.dumps({"id": request_id, "text": "Test."}).encode()
        controller.publish(OutboundMessage(speak, payload))
    clock.wait([(i, "accepted") for i in ids], 120)
    last_accepted = max((clock.seen.get((i, "accepted"), sent) for i in ids), default=sent)
    clock.wait([(i, "final") for i in ids], 600)
    finals = [clock.counts.get((i, "final"), 0) for i in ids]
    rejected = sum(1 for i in ids if (i, "rejected") in clock.seen)
    intake_s = max(1e-6, last_accepted - sent)
    return {
        "publish_to_accepted": summary(accepted),
        "publish_to_first_audio": summary(started),
        "publish_to_first_audio_repeated_phrase": summary(repeated),
        "wyoming_to_first_chunk": summary(wyoming),
        "wyoming_to_first_chunk_repeated_phrase": summary(wyoming_repeated),
        "burst": {
            "commands": len(ids),
            "accepted": sum(1 for i in ids if (i, "accepted") in clock.seen),
            "rejected": rejected,
            "accepted_per_s": round(len(ids) / intake_s, 1),
            "finished": sum(1 for i in ids if (i, "finished") in clock.seen),
            "lost": sum(1 for f in finals if f == 0),
            "duplicated": sum(1 for f in finals if f > 1),
        },
    }


if __name__ == "__main__":
    sys.exit(main())
