"""``tts-agent run`` and ``tts-agent send`` as real processes: presence, Last Will, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.mqtt.topics import Namespace
from agent.settings import Settings
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, daemon
from tests.support.cli import AGENT, agent_cli

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")


def tts(*args: str, settings: Settings, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=agent_env(settings), timeout=timeout)


@pytest.fixture()
def settings(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Settings:
    return agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                          mqtt={"keepalive_s": 5})


@pytest.fixture()
def agent_process(settings: Settings, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with daemon(settings, tmp_path / "agent.log") as process:
        yield process


@pytest.mark.slow
@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_sigkill_makes_the_broker_publish_offline(mqtt_broker: Broker,
                                                  agent_process: subprocess.Popen[bytes]) -> None:
    with Recorder(mqtt_broker.settings(), [DEV.status.as_filter()], "watch") as watch:
        online = watch.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=60)
        agent_process.send_signal(signal.SIGKILL)
        offline = watch.wait_json(DEV.status, lambda p: p["state"] == "offline", timeout=30)
    # the Will names the instance that died (#27 item 9: a device id used twice)
    assert offline == {"state": "offline", "device": "t1", "instance": online["instance"]}
    with Recorder(mqtt_broker.settings(), [DEV.status.as_filter()], "late") as late:
        assert late.wait_json(DEV.status, lambda p: True)["state"] == "offline"  # retained


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_sigterm_stops_cleanly(mqtt_broker: Broker, agent_process: subprocess.Popen[bytes],
                               settings: Settings, tmp_path: Path) -> None:
    with Recorder(mqtt_broker.settings(), [DEV.status.as_filter()], "watch") as watch:
        watch.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=60)
        agent_process.send_signal(signal.SIGTERM)
        assert agent_process.wait(30) == 0
        stopped = watch.wait_json(DEV.status, lambda p: p["state"] == "stopped")
    assert stopped["device"] == "t1"
    states = [json.loads(m.payload)["state"] for m in watch.messages]
    assert "offline" not in states  # a clean disconnect does not fire the Last Will


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_send_wait_prints_the_final_event(mqtt_broker: Broker, tiny_voice_dir: Path,
                                          tmp_path: Path, protocol: str) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": protocol})
    log = (tmp_path / "agent.log").open("wb")
    agent = subprocess.Popen([*AGENT, "run"], env=agent_env(settings),
                             stdout=log, stderr=subprocess.STDOUT)
    try:
        with Recorder(mqtt_broker.settings(), [DEV.status.as_filter()], "watch") as watch:
            watch.wait_json(DEV.status, lambda p: p["state"] == "online", timeout=60)
        result = tts("send", "--device", "t1", "speak", "Hello from the command line.",
                     "--wait", "--progress", "--id", "cli-1", settings=settings)
        assert result.returncode == 0, result.stderr
        events = [json.loads(line) for line in result.stdout.splitlines()]
        assert [e["event"] for e in events] == ["accepted", "started", "finished"]
        assert {e["id"] for e in events} == {"cli-1"}

        result = tts("send", "--device", "t1", "speak", "x", "--voice", "nobody", "--wait",
                     settings=settings)
        assert result.returncode == 1
        assert json.loads(result.stdout)["event"] == "rejected"

        result = tts("send", "--all", "ping", "--wait", "--timeout", "3", settings=settings)
        assert result.returncode == 0, result.stderr
        assert [json.loads(line)["event"] for line in result.stdout.splitlines()] == ["pong"]
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
        log.close()


def test_send_errors(settings: Settings, mqtt_broker: Broker) -> None:
    result = tts("send", "--device", "t1", "volume", "3", settings=settings)
    assert result.returncode == 2 and "volume" in result.stderr and "Traceback" not in result.stderr
    result = tts("send", "--device", "nobody-home", "ping", "--wait", "--timeout", "2",
                 settings=settings)
    assert result.returncode == 3 and "no answer" in result.stderr
    mqtt_broker.stop()
    result = tts("send", "--device", "t1", "ping", "--timeout", "2", settings=settings)
    assert result.returncode == 3 and "cannot reach the broker" in result.stderr
