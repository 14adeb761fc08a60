"""Two agents with one device id (#27 item 9) over a real Mosquitto: each process has an instance
id in its presence and answers, and reads its own status topic. With two running (different MQTT
client ids), both healths say ``failing`` with the other's instance id, ``send --device D ping
--wait`` (and ``--all``) prints both answers and exits 4 naming the conflict, ``fleet`` shows the
device as ``conflict``; once one stops, the other's health recovers and its presence is the
retained one.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agent.commands import CONFLICT, OK
from agent.daemon.service import AgentService
from agent.mqtt.topics import Namespace
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, running_agent
from tests.support.cli import agent_cli

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEVICE = "twin"
STATUS = Namespace("tts").device(DEVICE).status


def until(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def conflict_reason(agent: AgentService) -> str | None:
    reasons = agent.health.snapshot()["reasons"]
    return next((r for r in reasons if "another agent instance" in r), None)


def tts(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=env, timeout=120)


def test_two_agents_with_one_device_id_say_so(mqtt_broker: Broker, tiny_voice_dir: Path,
                                              tmp_path: Path) -> None:
    def settings(name: str) -> Any:
        return agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / name,
                              device_id=DEVICE, mqtt={"client_id": f"tts-agent-{name}"})

    env = agent_env(settings("controller"))
    with ExitStack() as stack:
        first = stack.enter_context(running_agent(settings("first")))
        with running_agent(settings("second")) as second:
            assert first.instance.id != second.instance.id
            for agent, other in ((first, second), (second, first)):
                reason = until(lambda a=agent: conflict_reason(a), what="the conflict")
                assert reason.endswith(f"another agent instance (id {other.instance.id}) is "
                                       f"using device id {DEVICE}")
                assert agent.health.snapshot()["state"] == "failing"
            ping = tts("send", "--device", DEVICE, "ping", "--wait", env=env)
            assert ping.returncode == CONFLICT, (ping.stdout, ping.stderr)
            answers = [json.loads(line) for line in ping.stdout.splitlines()]
            assert {a["instance"] for a in answers} == {first.instance.id, second.instance.id}
            assert f"conflict: device {DEVICE} answered from 2 agent instances" in ping.stderr
            every = tts("send", "--all", "ping", "--wait", "--timeout", "5", env=env)
            assert every.returncode == CONFLICT, (every.stdout, every.stderr)
            assert len(every.stdout.splitlines()) == 2
            assert f"conflict: device {DEVICE} answered from 2 agent instances" in every.stderr

            def fleet_row() -> dict[str, Any] | None:
                out = tts("fleet", "--json", "--settle", "0.5", env=env).stdout
                rows = [r for r in json.loads(out)["devices"] if r["device"] == DEVICE]
                return rows[0] if rows and rows[0]["state"] == "conflict" else None
            row = until(fleet_row, what="fleet's conflict row")
            assert "another agent instance" in row["last_error"]
        until(lambda: conflict_reason(first) is None, what="the recovery")
        assert first.health.snapshot()["instance"]["state"] == "ok"
        with Recorder(mqtt_broker.settings(), [STATUS.as_filter()], "watch") as watch:
            watch.wait_json(STATUS, lambda p: p["state"] == "online"
                            and p["instance"] == first.instance.id, timeout=30)
        ping = tts("send", "--device", DEVICE, "ping", "--wait", env=env)
        assert ping.returncode == OK, (ping.stdout, ping.stderr)
        assert json.loads(ping.stdout)["instance"] == first.instance.id
