"""Synchronized group speech (#30): how far from the shared start time each member's first sample
reaches its speaker.

    .venv/bin/python bench/sync_start.py [--members 4] [--rounds 10] [--lead 2.0] [--json PATH]

Several real agent processes (``python -m agent run``, the real voice) join one group on a
Mosquitto on loopback; each plays into its own clock card (``tests/support/clock_card.py``: an
alsa-lib I/O plugin that plays in real time, so ALSA's delay is true, and records when each
frame was due at the speaker). Each round a controller sends one group speak with a start time
``at`` (now + ``--lead``) and a chime whose first sample is loud; once every member answered,
each card's record says when that sample was due. The start error of a member is that time
less ``at``; the figures are p50, p95 and max of the errors over members and rounds (and of
the spread within a round), with the machine's load average before and after. All members
share this machine's clock, so this is the local error; across machines add the clocks'
offsets (docs/fleet.md#synchronized-group-speech).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
import wave
from pathlib import Path
from typing import Any

import numpy as np
from results import ROOT, Figures, add_json_option, write_result

sys.path.insert(0, str(ROOT))
from agent.mqtt.topics import Namespace
from agent.settings.chimes import ChimeSettings
from tests.support.broker import Recorder, agent_settings, daemon, running_broker
from tests.support.clock_card import ClockCard, build_plugin

NS = Namespace("tts")
GROUP = "bench"
TEXT = "Platform two for the airport train."
WAIT_S = 120.0
"""Upper bound on a member's answer; reaching it is reported, not asserted."""


def write_gong(directory: Path, rate: int = 22050) -> None:
    """A chime whose first sample is loud: where it lands on a card marks the start."""
    directory.mkdir(parents=True, exist_ok=True)
    with wave.open(str(directory / "gong.wav"), "wb") as gong:
        gong.setnchannels(1)
        gong.setsampwidth(2)
        gong.setframerate(rate)
        samples = np.sin(np.arange(rate // 5) / 3.0) * 20000 + 2000
        gong.writeframes(samples.astype("<i2").tobytes())


def gong_due(card: ClockCard, after: float) -> float | None:
    """When the first gong sample played after Unix time ``after`` was due, if one was."""
    frames = card.frames()[:, 0]
    for index in np.flatnonzero(frames > 1500):
        due = card.due(int(index))
        if due > after:
            return due
    return None


def start_members(stack: contextlib.ExitStack, broker: Any, work: Path,
                  members: int) -> dict[str, ClockCard]:
    library = build_plugin(Path(tempfile.gettempdir()) / "tts-agent-tests")
    cards = {}
    for n in range(members):
        device = f"member-{n + 1}"
        home = work / device
        write_gong(home / "chimes")
        card = ClockCard(library, home / "card.raw", 22050)
        (home / "asound.conf").write_text(card.config("card"))
        settings = agent_settings(broker, ROOT / "models", home, device_id=device,
                                  voice="en_US-joe-medium", mqtt={"groups": [GROUP]},
                                  audio={"device": "card", "keep_open_s": 60})
        settings = settings.model_copy(update={"chimes": ChimeSettings(dir=home / "chimes")})
        stack.enter_context(daemon(settings, home / "agent.log",
                                   env={"ALSA_CONFIG_PATH": str(home / "asound.conf")}))
        cards[device] = card
    return cards


def wait_ready(broker: Any, devices: list[str]) -> None:
    topics = [NS.device(d).health.as_filter() for d in devices]
    with Recorder(broker.settings(), topics, "bench-ready") as watch:
        for device in devices:
            watch.wait_json(NS.device(device).health, lambda p: "sync" in p, timeout=WAIT_S)


def one_round(broker: Any, devices: list[str], lead: float) -> tuple[float, dict[str, Any]]:
    """Send one synchronized group speak; its ``at`` and each member's final event."""
    request_id = uuid.uuid4().hex
    at = time.time() + lead
    events = NS.all_events()
    with Recorder(broker.settings(), [events], f"bench-{request_id[:6]}") as rec:
        rec.publish(NS.group_command(GROUP, "speak"),
                    {"id": request_id, "text": TEXT, "chime": "gong", "at": at * 1000})
        finals: dict[str, Any] = {}
        deadline = time.monotonic() + WAIT_S + lead
        while len(finals) < len(devices) and time.monotonic() < deadline:
            time.sleep(0.2)
            for message in list(rec.messages):
                with contextlib.suppress(ValueError):
                    event = json.loads(message.payload)
                    if event.get("id") == request_id and event.get("final"):
                        finals[event["device"]] = event
    return at, finals


def measure(members: int, rounds: int, lead: float) -> dict[str, Any]:
    load_before = os.getloadavg()
    errors: list[float] = []
    spreads: list[float] = []
    late: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        broker = stack.enter_context(running_broker(work / "broker"))
        cards = start_members(stack, broker, work, members)
        devices = sorted(cards)
        wait_ready(broker, devices)
        for _ in range(rounds):
            at, finals = one_round(broker, devices, lead)
            time.sleep(0.5)  # the cards record a frame once it was due
            this = []
            for device in devices:
                due = gong_due(cards[device], at - 1.0)
                final = finals.get(device, {})
                if final.get("late_by_ms"):
                    late.append({"device": device, "late_by_ms": final["late_by_ms"]})
                if due is not None and final.get("event") == "finished":
                    this.append((due - at) * 1000)
            errors.extend(this)
            if len(this) > 1:
                spreads.append(max(this) - min(this))
            time.sleep(1.0)
    return {"errors_ms": [round(e, 3) for e in errors], "spreads_ms": [round(s, 3) for s in
                                                                         spreads],
            "late": late, "members": members, "rounds": rounds, "lead_s": lead,
            "load_before": load_before, "load_after": os.getloadavg()}


def quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "max": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p95": round(p95, 3),
            "max": round(ordered[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--lead", type=float, default=2.0, help="seconds from send to start")
    add_json_option(parser, "sync_start")
    args = parser.parse_args(argv)
    raw = measure(args.members, args.rounds, args.lead)
    figures = Figures()
    error = quantiles([abs(e) for e in raw["errors_ms"]])
    spread = quantiles(raw["spreads_ms"])
    rows: list[list[str | None]] = []
    for name, values, what in (("error", error, "|first sample due - start time|"),
                               ("spread", spread, "latest - earliest member, per round")):
        cells = [figures.add(f"{name}_ms.{q}", v, "ms", f"{what}: {q}")
                 if v is not None else None for q, v in values.items()]
        rows.append([what, *cells])
    starts = figures.add("starts", len(raw["errors_ms"]), "", "member starts measured")
    late = figures.add("late", len(raw["late"]), "", "member starts reported late")
    load = figures.add("load_1min", round(raw["load_before"][0], 2), "",
                       "1-minute load average before the run")
    figures.table(f"Synchronized starts on one machine: {args.members} agent processes, "
                  f"{args.rounds} group speaks, {args.lead:g} s lead",
                  ["what", "p50", "p95", "max"], rows,
                  note=f"{starts} member starts measured on clock cards, {late} reported late; "
                       f"load average {load} on this machine before the run. Across machines "
                       "add the offset between their clocks.")
    print(json.dumps({"error_ms": error, "spread_ms": spread, "late": raw["late"],
                      "load": raw["load_before"]}, indent=1))
    write_result("sync_start", figures, args, raw=raw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
