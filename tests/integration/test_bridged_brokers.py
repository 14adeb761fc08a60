"""The agent across two Mosquitto brokers bridged to each other, a small model of a clustered
deployment (issue #18): devices on broker A, the controller (the tests' recorders, ``send``,
``fleet``) on broker B, whose configuration bridges the agent's topics both ways to A.

The end-to-end tests are the Mosquitto suite's own, run here unchanged: this module only swaps
the ``mqtt_broker`` fixture they ask for (``tests.support.other_brokers.BridgedPair``: its
``settings()`` are B's, what agents get from ``agent_settings`` is A's). The bridge carries the
agent's topics only, so a Response Topic of the controller's own outside them does not cross it
(``send --wait`` replies in ``tts/reply/...``, which does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.mqtt.topics import Namespace, TopicFilter
from agent.settings import Settings
from tests.integration import test_mqtt_agent, test_mqtt_process, test_reload_agent
from tests.support.broker import Recorder, agent_env, agent_settings, daemon, running_agent
from tests.support.cli import agent_cli
from tests.support.other_brokers import BridgedPair, running_bridged_pair

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
EVERY_STATUS = TopicFilter("tts/+/status")  # what a fleet view subscribes to
EVERY_HEALTH = TopicFilter("tts/+/health")


@pytest.fixture()
def mqtt_broker(tmp_path: Path) -> Iterator[BridgedPair]:
    with running_bridged_pair(tmp_path / "brokers") as pair:
        yield pair


# The fixtures and tests of the Mosquitto suite, unchanged.
agent = test_mqtt_agent.agent
controller = test_mqtt_agent.controller
settings = test_mqtt_process.settings
agent_process = test_mqtt_process.agent_process
versions = test_reload_agent.versions
start_agent = test_reload_agent.start_agent

test_speak_accepted_started_finished = test_mqtt_agent.test_speak_accepted_started_finished
test_redelivered_command_is_spoken_once = test_mqtt_agent.test_redelivered_command_is_spoken_once
test_retained_command_is_not_replayed = test_mqtt_agent.test_retained_command_is_not_replayed
test_control_commands = test_mqtt_agent.test_control_commands
test_presence_online_retained_then_stopped = (
    test_mqtt_agent.test_presence_online_retained_then_stopped)
test_group_and_fleet_topics = test_mqtt_agent.test_group_and_fleet_topics
test_hermes_say_and_say_finished = test_mqtt_agent.test_hermes_say_and_say_finished
test_mqtt_311_agent = test_mqtt_agent.test_mqtt_311_agent
test_sigkill_makes_the_broker_publish_offline = (
    test_mqtt_process.test_sigkill_makes_the_broker_publish_offline)
test_sigterm_stops_cleanly = test_mqtt_process.test_sigterm_stops_cleanly
test_reload_command_switches_version_and_rolls_back = pytest.mark.voice(
    test_reload_agent.test_reload_command_switches_version_and_rolls_back)


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
