"""A simulated fleet: N agents on one machine, on two bridged Mosquitto brokers, answering a
group speak and a fleet ping.

Each agent is a real ``python -m agent run`` process with the tiny generated voice
(``tests/support/make_tiny_voice.py``, so synthesis is not what is measured) playing into an
ALSA ``file`` PCM of its own. The agents connect to broker A; the controller (this bench's own
client, then ``tts-agent send --group ... --wait``) to broker B, which bridges the agent topics
both ways to A (``tests.support.other_brokers``), a small model of a clustered deployment.
The agents are started one after another; the measurements begin once every one is online.

* group speak: one command on ``tts/group/<group>/cmd/speak``, every agent a member; per
  device, the time from the publish to its ``finished`` event arriving at the controller;
* fleet ping: one ``tts/all/cmd/ping``; per device, publish -> ``pong``;
* p50 / p95 / max over the devices and rounds, and every device that did not answer;
* ``tts-agent send --group <group> speak ... --wait`` once, its exit code and summary line;
* the sizes of the messages each device sends (presence, health report, events), and from them
  and the agent's default settings a paper estimate of what a 10,000-device fleet puts on a
  broker (connections, retained topics, messages and bytes per health interval).

    .venv/bin/python bench/fleet_sim.py [--agents 20] [--rounds 3] [--timeout 120]
        [--estimate-devices 10000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results import Figures, add_json_option, write_result  # noqa: E402

from agent.mqtt.client import InboundMessage, MqttClient, OutboundMessage  # noqa: E402
from agent.mqtt.intake import Intake  # noqa: E402
from agent.mqtt.topics import Namespace  # noqa: E402
from agent.settings import Settings  # noqa: E402
from tests.support import make_tiny_voice  # noqa: E402
from tests.support.broker import agent_env, agent_settings  # noqa: E402
from tests.support.other_brokers import BridgedPair, running_bridged_pair  # noqa: E402

NS = Namespace("tts")
GROUP = "fleet"
START_TIMEOUT_S = 120.0


class Controller:
    """The bench's own client on broker B: every device's events and status, with arrival
    times (monotonic)."""

    def __init__(self, pair: BridgedPair) -> None:
        self.cond = threading.Condition()
        self.finals: dict[str, dict[str, float]] = {}  # request id -> device -> arrival
        self.events: dict[str, dict[str, str]] = {}  # request id -> device -> final event
        self.online: set[str] = set()
        self.sizes: dict[str, list[int]] = {}
        self.client = MqttClient(pair.settings(), "fleet-sim-controller", persistent=False,
                                 subscriptions=[NS.all_events(), NS.all_status(),
                                                NS.all_health()],
                                 on_message=self._receive)

    def _receive(self, message: InboundMessage) -> None:
        """Network thread: note sizes, presence and final events."""
        arrived = time.monotonic()
        try:
            payload = json.loads(message.payload) if message.payload else {}
        except ValueError:
            return
        kind = message.topic.value.rsplit("/", 1)[-1]
        name = payload.get("event") if kind == "events" else kind
        with self.cond:
            self.sizes.setdefault(str(name), []).append(len(message.payload))
            if kind == "status":
                device = str(payload.get("device"))
                (self.online.add if payload.get("state") == "online" else
                 self.online.discard)(device)
            elif kind == "events" and payload.get("final"):
                self.finals.setdefault(str(payload.get("id")), {})[
                    str(payload.get("device"))] = arrived
                self.events.setdefault(str(payload.get("id")), {})[
                    str(payload.get("device"))] = str(payload.get("event"))
            self.cond.notify_all()

    def wait(self, check: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not check():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)
            return True

    def command(self, topic: Any, payload: dict[str, Any], devices: list[str],
                timeout: float) -> tuple[float, dict[str, float], dict[str, str]]:
        """Publish, wait for every device's final; the latencies (s) and the final events."""
        request_id = str(payload["id"])
        sent = time.monotonic()
        self.client.publish(OutboundMessage(topic, json.dumps(payload).encode()))
        self.wait(lambda: len(self.finals.get(request_id, {})) >= len(devices), timeout)
        with self.cond:
            arrivals = dict(self.finals.get(request_id, {}))
            events = dict(self.events.get(request_id, {}))
        return sent, {d: t - sent for d, t in arrivals.items()}, events


@contextmanager
def fleet(pair: BridgedPair, models: Path, work: Path, count: int) -> Iterator[list[str]]:
    """``count`` agent processes on broker A, started one after another (each online before
    the next starts), stopped with SIGTERM at the end."""
    devices = [f"sim-{n:03d}" for n in range(count)]
    processes: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []
    try:
        watcher = Controller(pair)
        watcher.client.start()
        watcher.client.wait_ready(30)
        for device in devices:
            settings = agent_settings(pair, models, work / device, device_id=device,
                                      mqtt={"groups": [GROUP]},
                                      audio={"keep_open_s": 0.5})
            log = (work / f"{device}.log").open("wb")
            logs.append(log)
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "agent", "run"], env=agent_env(settings),
                stdout=log, stderr=subprocess.STDOUT))
            if not watcher.wait(lambda d=device: d in watcher.online, START_TIMEOUT_S):
                raise SystemExit(f"{device} did not come online (log: {work / device}.log)")
            print(f"online: {device}", file=sys.stderr)
        watcher.client.close(2)
        yield devices
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        for log in logs:
            log.close()


def stats_ms(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(v * 1000 for v in values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"p50_ms": round(statistics.median(ordered), 1), "p95_ms": round(p95, 1),
            "max_ms": round(ordered[-1], 1), "n": len(ordered)}


def run_account(pair: BridgedPair, models: Path, work: Path, timeout: float) -> dict[str, Any]:
    """``tts-agent send --group fleet speak ... --wait`` on broker B: exit code, summary."""
    settings = agent_settings(pair, models, work / "send", device_id="controller")
    env = agent_env(settings.model_copy(update={"mqtt": pair.settings()}))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agent", "send", "--group", GROUP, "speak", "Account check.",
         "--wait", "--timeout", str(timeout)], env=env, capture_output=True, text=True,
        timeout=timeout + 120, check=False)
    summary = [line for line in done.stderr.splitlines() if "expected" in line]
    return {"exit_code": done.returncode, "wall_s": round(time.monotonic() - started, 2),
            "finals_printed": len(done.stdout.splitlines()),
            "summary": summary[-1].strip() if summary else done.stderr.strip()[-300:]}


def measure(args: argparse.Namespace, pair: BridgedPair, devices: list[str],
            models: Path, work: Path) -> dict[str, Any]:
    controller = Controller(pair)
    controller.client.start()
    if not controller.client.wait_ready(30):
        raise SystemExit("the controller could not connect to broker B")
    try:
        controller.wait(lambda: controller.online >= set(devices), 30)
        out: dict[str, Any] = {}
        for name, topic, payload in (
                ("group_speak", NS.group_command(GROUP, "speak"),
                 {"text": "Attention please. This is a fleet test."}),
                ("fleet_ping", NS.fleet_command("ping"), {})):
            latencies: list[float] = []
            missing: set[str] = set()
            failed: dict[str, str] = {}
            for round_ in range(args.rounds):
                _, answered, events = controller.command(
                    topic, {"id": f"{name}-{round_}", **payload}, devices, args.timeout)
                latencies += answered.values()
                missing |= set(devices) - set(answered)
                failed |= {d: e for d, e in events.items()
                           if e not in ("finished", "pong")}
            out[name] = {**stats_ms(latencies), "no_answer": sorted(missing),
                         "failed": failed}
        with controller.cond:
            out["message_bytes"] = {k: max(v) for k, v in sorted(controller.sizes.items())}
    finally:
        controller.client.close(2)
    out["account"] = run_account(pair, models, work, args.timeout)
    return out


def estimate(sizes: dict[str, int], devices: int) -> dict[str, Any]:
    """What ``devices`` agents with the default settings put on a broker (paper estimate from
    the settings and the measured message sizes)."""
    settings = Settings(device_id="estimate")
    interval = settings.health.interval_s
    keepalive = settings.mqtt.keepalive_s
    topics = NS.device("estimate")
    filters = len(Intake.subscriptions(topics, (GROUP,), settings.mqtt.hermes))
    health, status = sizes.get("health", 0), sizes.get("status", 0)
    speak_events = sum(sizes.get(e, 0) for e in ("accepted", "started", "finished"))
    return {
        "devices": devices, "health_interval_s": interval, "keepalive_s": keepalive,
        "session_expiry_s": settings.mqtt.session_expiry_s,
        "connections": devices,
        "subscriptions": devices * filters, "filters_per_device": filters,
        "retained_topics": devices * 2,
        "retained_bytes": devices * (health + status),
        "health_messages_per_interval": devices,
        "health_bytes_per_interval": devices * health,
        "health_messages_per_s": round(devices / interval, 1),
        "health_bytes_per_s": round(devices * health / interval),
        "pings_per_s": round(devices / keepalive, 1),
        "group_speak_messages": devices * 3, "group_speak_bytes": devices * speak_events,
        "fleet_ping_bytes": devices * sizes.get("pong", 0),
    }


def record(results: dict[str, Any]) -> Figures:
    figures = Figures()
    rows: list[list[str | None]] = []
    for key, label in (("group_speak", "group speak: publish -> finished, per device"),
                       ("fleet_ping", "fleet ping: publish -> pong, per device")):
        values = results[key]
        rows.append(figures.latency_row(key, label, values))
        rows[-1].append(figures.add(f"{key}.no_answer", len(values["no_answer"]), "",
                                    f"{label}: devices that did not answer"))
    figures.table(f"{results['agents']} agents on a bridged Mosquitto pair (devices on A, the "
                  "controller on B)", ["", "median", "p95", "max", "answers", "no answer"], rows,
                  note="Every agent is a process with the tiny generated voice, playing into an "
                       "ALSA file sink; all on this one machine.")
    account = results["account"]
    figures.add("account.exit_code", account["exit_code"], "",
                "tts-agent send --group --wait: exit code (0: every device finished)")
    figures.add("account.wall_s", account["wall_s"], "s",
                "tts-agent send --group --wait: wall time of the whole command")
    figures.table("The account: tts-agent send --group fleet speak ... --wait",
                  ["", "value"], [["exit code", "account.exit_code"],
                                  ["wall time (process start to exit)", "account.wall_s"]],
                  note=f"Its summary: {account['summary']}")
    sizes = results["message_bytes"]
    figures.table("Message sizes a device sends (largest seen)", ["message", "bytes"],
                  [[name, figures.add(f"bytes.{name}", size, "B", f"largest {name} message")]
                   for name, size in sizes.items()])
    est = results["estimate"]
    labels = {
        "connections": ("MQTT connections", ""),
        "subscriptions": ("subscriptions (filters)", ""),
        "retained_topics": ("retained topics (status, health)", ""),
        "retained_bytes": ("retained bytes held", "B"),
        "health_messages_per_interval": ("health reports per health interval", ""),
        "health_bytes_per_interval": ("health bytes per health interval", "B"),
        "health_messages_per_s": ("health reports per second", "/s"),
        "health_bytes_per_s": ("health bytes per second", "B/s"),
        "pings_per_s": ("keepalive PINGREQs per second, at most (connections quiet for "
                        "mqtt.keepalive_s)", "/s"),
        "group_speak_messages": ("events of one fleet-wide speak (accepted, started, finished)",
                                 ""),
        "group_speak_bytes": ("bytes of those events", "B"),
        "fleet_ping_bytes": ("bytes of the pongs of one fleet ping", "B"),
    }
    figures.table(
        f"Paper estimate: {est['devices']} devices on one broker (cluster)", ["", "value"],
        [[label, figures.add(f"estimate.{key}", est[key], unit, f"estimate: {label}")]
         for key, (label, unit) in labels.items()],
        note=f"From the agent's default settings (health.interval_s = {est['health_interval_s']}"
             f", mqtt.keepalive_s = {est['keepalive_s']}, mqtt.hermes on, one group) and the "
             "message sizes measured above (the tiny voice: a real voice's health report "
             "names its own files and figures and is larger). QoS 1: each message also "
             "costs a PUBACK; a controller's subscription adds one delivery per message.")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20, help="agents to run (default 20)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="group speaks and fleet pings each (default 3)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="longest wait for every device's answer (s, default 120)")
    parser.add_argument("--estimate-devices", type=int, default=10_000,
                        help="fleet size of the paper estimate (default 10000)")
    add_json_option(parser, "fleet_sim")
    args = parser.parse_args(argv)
    if not 1 <= args.agents <= 200:
        parser.error("--agents must be between 1 and 200")
    with tempfile.TemporaryDirectory(prefix="fleet-sim-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        models = work / "models"
        models.mkdir()
        make_tiny_voice.build_bundle(models)
        pair = stack.enter_context(running_bridged_pair(work / "brokers"))
        load_before = os.getloadavg()[0]
        devices = stack.enter_context(fleet(pair, models, work, args.agents))
        results = measure(args, pair, devices, models, work)
    results.update(agents=args.agents, load_before=round(load_before, 2),
                   load_after=round(os.getloadavg()[0], 2))
    results["estimate"] = estimate(results["message_bytes"], args.estimate_devices)
    print(json.dumps(results, indent=2))
    write_result("fleet_sim", record(results), args, raw=results)
    silent = results["group_speak"]["no_answer"] or results["fleet_ping"]["no_answer"]
    return 1 if silent else 0


if __name__ == "__main__":
    raise SystemExit(main())
