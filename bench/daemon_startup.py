"""The agent as systemd starts it: ``python -m agent run`` from spawn to ``READY=1``, and its peak
RSS once it has spoken a paragraph that came over MQTT.

    .venv/bin/python bench/daemon_startup.py [--runs 5] [--variant int8] [--json PATH]

Each run spawns the daemon with a notify socket of its own (as systemd's ``Type=notify``), a
Mosquitto on a free loopback port and an ALSA ``file`` PCM; READY=1 means the default voice is
loaded and warm (see ``docs/operations.md``, "Service life cycle"). The first run starts with
an empty optimised-model cache (a device's first boot builds it); the later runs find it; one
more starts on a fresh cache that ``tts-agent prepare`` filled (as ``build.sh`` does). After
READY a controller publishes a speak command with the paragraph and waits for its final event;
the ``VmHWM`` of the daemon and of its PCM helper (summed) is read from ``/proc`` before it is
stopped.

Also measured, each in a fresh process: what the fixed stack costs before any of our code runs
(the interpreter; importing numpy, onnxruntime, pydantic-settings and structlog).

Our package is byte-compiled first, as ``pip install`` leaves it on a device (a checkout with
``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile every module at every start).
``bench/compare_piper.py`` runs this next to Piper and prints the ratios.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results import Figures, add_json_option, write_result
from workload import PARAGRAPH, ROOT, VOICE, tree_hwm_kib

sys.path.insert(0, str(ROOT))

STACK = {"python": "",
         "python + numpy + onnxruntime + pydantic-settings + structlog":
             "import numpy, onnxruntime, pydantic_settings, structlog"}
"""What every start pays before the agent's own code: the interpreter and the fixed libraries."""
_HWM = ("import sys\nfor l in open('/proc/self/status'):\n"
        "    l.startswith('VmHWM:') and sys.stdout.write(l.split()[1])")


def byte_compile() -> None:
    """Compile the agent's modules as ``pip install`` does on a device."""
    compileall.compile_dir(str(ROOT / "agent"), quiet=1)


def stack_cost(runs: int) -> dict[str, dict[str, float]]:
    """Median seconds from spawn to exit of a process that only imports the fixed stack, and its
    peak RSS (MiB)."""
    out: dict[str, dict[str, float]] = {}
    for label, code in STACK.items():
        seconds, rss = [], []
        for _ in range(runs):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", f"{code}\n{_HWM}"], check=True,
                                  capture_output=True, text=True)
            seconds.append(time.perf_counter() - started)
            rss.append(int(done.stdout) / 1024)
        out[label] = {"s": statistics.median(seconds), "rss_mib": statistics.median(rss)}
    return out


def _agent_env(work: Path, models_dir: Path, variant: str, port: int,
               notify: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
    env.update({
        "TTS_AGENT_DEVICE_ID": "bench", "TTS_AGENT_MQTT__HOST": "127.0.0.1",
        "TTS_AGENT_MQTT__PORT": str(port), "TTS_AGENT_MODELS__DIR": str(models_dir),
        "TTS_AGENT_MODELS__DEFAULT_VOICE": VOICE, "TTS_AGENT_MODELS__VARIANT": variant,
        "TTS_AGENT_AUDIO__DEVICE": f"file:'{work / 'out.raw'}',raw",
        "TTS_AGENT_CACHE__DIR": str(work / "cache"), "TTS_AGENT_LOG__LEVEL": "warning",
        "NOTIFY_SOCKET": str(notify), "PYTHONDONTWRITEBYTECODE": "1",
    })
    return env


def measure(models_dir: Path, variant: str, runs: int) -> dict[str, Any]:
    """``runs`` + 1 daemon starts (the first with an empty cache): seconds to READY=1 and peak
    RSS (MiB) after speaking the paragraph; plus the fixed stack's import times."""
    from mqtt_latency import Clock, start_broker

    from agent.mqtt.client import MqttClient
    from agent.mqtt.topics import Namespace
    from agent.settings import MqttSettings

    byte_compile()
    starts: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="tts-bench-daemon-") as tmp:
        work = Path(tmp)
        broker, port = start_broker(work)
        mqtt = MqttSettings(host="127.0.0.1", port=port)
        topics = Namespace(mqtt.topic_prefix).device("bench")
        clock = Clock()
        controller = MqttClient(mqtt, "bench-controller", on_message=clock, persistent=False,
                                subscriptions=[topics.events.as_filter()])
        controller.start()
        try:
            if not controller.wait_ready(10):
                raise SystemExit("could not connect to the bench broker")
            env = _agent_env(work, models_dir, variant, port, work / "notify.sock")
            channel = (controller, clock, topics.command("speak"))
            for run in range(runs + 1):
                starts.append(_one_start(env, run, channel))
            prepared = _prepared_start(env, work, runs + 1, channel)
        finally:
            controller.close(2)
            broker.terminate()
            broker.wait(5)
    later = starts[1:]
    return {"ready_cold_s": starts[0]["ready_s"], "ready_prepared_s": prepared["ready_s"],
            "ready_s": statistics.median(s["ready_s"] for s in later),
            "rss_mib": statistics.median(s["rss_mib"] for s in later),
            "daemon_rss_mib": statistics.median(s["daemon_rss_mib"] for s in later),
            "helper_rss_mib": statistics.median(s["helper_rss_mib"] for s in later),
            "stack": stack_cost(max(runs, 3))}


def _prepared_start(env: dict[str, str], work: Path, run: int, channel: tuple[Any, Any, Any]
                    ) -> dict[str, float]:
    """The first start on an empty cache that ``tts-agent prepare`` has filled (as ``build.sh``
    and a package's install do)."""
    env = {**env, "TTS_AGENT_CACHE__DIR": str(work / "cache-prepared")}
    subprocess.run([sys.executable, "-m", "agent", "prepare"], env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return _one_start(env, run, channel)


def _one_start(env: dict[str, str], run: int, channel: tuple[Any, Any, Any]
               ) -> dict[str, float]:
    """Start the daemon with ``env``; ``channel`` is the controller, its event clock and the
    speak topic."""
    from agent.mqtt.client import OutboundMessage

    controller, clock, speak = channel
    notify_path = Path(env["NOTIFY_SOCKET"])
    notify_path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(notify_path))
        notify.settimeout(120)
        time.sleep(0.2)  # the previous daemon's threads are gone
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "agent", "run"], env=env, cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            ready = time.perf_counter() - started
            # READY comes once the voice is warm; the MQTT connection may still be on its way,
            # and a command sent before the daemon subscribed is lost: send a new one until
            # one is accepted.
            for attempt in range(60):
                request = f"startup-{run}-{attempt}"
                payload = json.dumps({"id": request, "text": PARAGRAPH}).encode()
                controller.publish(OutboundMessage(speak, payload))
                if clock.wait([(request, "accepted")], 0.5):
                    break
            else:
                raise RuntimeError("the daemon never accepted a speak command")
            if not clock.wait([(request, "final")], 120):
                raise RuntimeError("the speak command never finished")
            peaks = tree_hwm_kib(process.pid)
        finally:
            process.terminate()
            process.wait(30)
    return {"ready_s": ready, "rss_mib": (peaks["main"] + peaks["helpers"]) / 1024,
            "daemon_rss_mib": peaks["main"] / 1024, "helper_rss_mib": peaks["helpers"] / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--variant", default="int8")
    parser.add_argument("--runs", type=int, default=5, help="later starts (after the first)")
    add_json_option(parser, "daemon_startup")
    args = parser.parse_args()
    from agent.logs import configure_logging

    configure_logging("warning")
    result = measure(args.models_dir, args.variant, args.runs)
    print(f"daemon spawn -> READY=1: first start {result['ready_cold_s'] * 1000:.0f} ms, later "
          f"starts median {result['ready_s'] * 1000:.0f} ms; peak RSS after speaking "
          f"{result['rss_mib']:.0f} MiB")
    for label, cost in result["stack"].items():
        print(f"  {label}: {cost['s'] * 1000:.0f} ms, {cost['rss_mib']:.0f} MiB")
    write_result("daemon_startup", record(result), args, raw=result)
    return 0


def record(result: dict[str, Any]) -> Figures:
    """What :func:`measure` returns, as figures."""
    figures = Figures()
    rows: list[list[str | None]] = [
        ["daemon, first start (empty optimised-model cache)",
         figures.add("ready_cold", result["ready_cold_s"] * 1000, "ms",
                     "python -m agent run from spawn to READY=1, first start"), None],
        ["daemon, first start after `tts-agent prepare`",
         figures.add("ready_prepared", result["ready_prepared_s"] * 1000, "ms",
                     "python -m agent run from spawn to READY=1, the first start on a cache "
                     "tts-agent prepare filled"), None],
        ["first start after prepare over later starts",
         figures.add("prepared_vs_later", result["ready_prepared_s"] / result["ready_s"], "x",
                     "the first start after prepare over the later starts' median "
                     "(#26 target: within 10%)"), None],
        ["daemon, later starts",
         figures.add("ready", result["ready_s"] * 1000, "ms",
                     "python -m agent run from spawn to READY=1, median of the later starts"),
         figures.add("rss", result["rss_mib"], "MiB",
                     "peak RSS (VmHWM) of the daemon and its PCM helper, summed, after "
                     "speaking the paragraph over MQTT, median of the later starts")],
        ["of which the daemon", None,
         figures.add("daemon_rss", result["daemon_rss_mib"], "MiB",
                     "the daemon process's own peak RSS (VmHWM), median of the later starts")],
        ["of which the PCM helper", None,
         figures.add("helper_rss", result["helper_rss_mib"], "MiB",
                     "the PCM helper process's peak RSS (VmHWM), median of the later starts")]]
    for n, (label, cost) in enumerate(result["stack"].items()):
        rows.append([f"{label} alone",
                     figures.add(f"stack_{n}.startup", cost["s"] * 1000, "ms",
                                 f"spawn to exit of a process that only runs: {label}"),
                     figures.add(f"stack_{n}.rss", cost["rss_mib"], "MiB",
                                 f"peak RSS of a process that only runs: {label}")])
    figures.table("Spawn to READY=1 and peak RSS", ["median", "start-up", "peak RSS"], rows)
    return figures


if __name__ == "__main__":
    sys.exit(main())
