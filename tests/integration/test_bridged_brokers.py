"""The agent across two Mosquitto brokers bridged to each other, a small model of a clustered
deployment (issue #18): devices on broker A, the controller (the tests' recorders, ``send``,
``fleet``) on broker B, whose configuration bridges the agent's topics both ways to A
(``tests.support.other_brokers.BridgedPair``: its ``settings()`` are B's, what agents get from
``agent_settings`` is A's).

What only the bridge needs testing is here. The end-to-end tests of the Mosquitto suite run on
the pair too, where they are: those marked ``@pytest.mark.brokers(..., "bridged", ...)``
(``tests/support/broker_matrix.py``), their ids ending in ``[bridged]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.mqtt.topics import Namespace, TopicFilter
from agent.settings import Settings
from tests.support.broker import Recorder, agent_env, agent_settings, daemon, running_agent
from tests.support.broker_matrix import broker_fixture
from tests.support.cli import agent_cli
from tests.support.other_brokers import BridgedPair

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
EVERY_STATUS = TopicFilter("tts/+/status")  # what a fleet view subscribes to
EVERY_HEALTH = TopicFilter("tts/+/health")


mqtt_broker = broker_fixture("bridged")


def controller_env(pair: BridgedPair, agent: Settings, protocol: str) -> dict[str, str]:
    """``tts-agent send`` on the controller's broker (B); the agent is on A."""
    return agent_env(agent.model_copy(update={"mqtt": pair.settings(protocol=protocol)}))


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_send_wait_across_the_bridge(mqtt_broker: BridgedPair, tiny_voice_dir: Path,
                                     tmp_path: Path, protocol: str) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": protocol})
    env = controller_env(mqtt_broker, settings, protocol)
    with running_agent(settings), Recorder(mqtt_broker.settings(), [DEV.status.as_filter()],
                                           "watch") as watch:
        watch.wait_json(DEV.status, lambda p: p["state"] == "online")
        result = agent_cli("send", "--device", "t1", "speak", "Over the bridge.", "--wait",
                           "--id", "b-1", env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.splitlines()[-1])["event"] == "finished"
        result = agent_cli("send", "--device", "t1", "ping", "--wait", env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.splitlines()[-1])["event"] == "pong"


def test_retained_presence_and_health_reach_the_controller_side(
        mqtt_broker: BridgedPair, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """A controller that subscribes on B after the agent came online on A gets its retained
    status and health, and after a SIGKILL the Last Will (A's) reaches B too."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"keepalive_s": 5})
    with daemon(settings, tmp_path / "agent.log") as process:
        with Recorder(mqtt_broker.device_settings(), [DEV.health.as_filter()], "on-a") as on_a:
            on_a.wait_json(DEV.health, lambda p: True, timeout=60)
        with Recorder(mqtt_broker.settings(), [EVERY_STATUS, EVERY_HEALTH], "late-b") as late:
            status = late.wait_json(DEV.status, lambda p: True)
            health = late.wait_json(DEV.health, lambda p: True)
            assert status["state"] == "online" and health["device_id"] == "t1"
            assert all(m.retain for m in late.messages)
            process.kill()
            late.wait_json(DEV.status, lambda p: p["state"] == "offline", timeout=60)
    with Recorder(mqtt_broker.settings(), [DEV.status.as_filter()], "later-b") as later:
        assert later.wait_json(DEV.status, lambda p: True)["state"] == "offline"



def test_a_device_in_32_groups_follows_every_one(mqtt_broker: BridgedPair, tiny_voice_dir: Path,
                                                 tmp_path: Path) -> None:
    """35 command filters go in SUBSCRIBEs of at most 8 (AWS IoT Core's limit); every one of
    them is acknowledged and followed."""
    groups = [f"g{n:02d}" for n in range(32)]
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"groups": groups})
    with running_agent(settings), Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "ctl") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        for group in (groups[0], groups[8], groups[-1]):
            ctl.publish(Namespace("tts").group_command(group, "ping"), {"id": f"ping-{group}"})
            pong = ctl.wait_json(DEV.events, lambda e, g=group: e["id"] == f"ping-{g}")
            assert pong["event"] == "pong"
