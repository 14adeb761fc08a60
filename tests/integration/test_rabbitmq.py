"""The agent on a second, independent broker: RabbitMQ's MQTT plugin (Debian's
``rabbitmq-server``, 3.10: MQTT 3.1.1 only), started by the test (issue #18).

The tests are the Mosquitto suite's own, run here unchanged: this module only swaps the
``mqtt_broker`` fixture they ask for (``tests.support.other_brokers.RabbitMq``, whose settings
say ``protocol = "3.1.1"``). Those that need MQTT 5 (Response Topic) or a retained message on a
wildcard subscription (RabbitMQ 3.10 delivers retained messages only on exact topics) are not
among them; docs/fleet.md, "Brokers", says what differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.client import InboundMessage
from agent.mqtt.topics import HERMES_SAY_FINISHED, Namespace, TopicFilter
from tests.integration import test_mqtt_agent, test_mqtt_process, test_reload_agent
from tests.support.broker import Recorder, agent_env, agent_settings, running_agent
from tests.support.other_brokers import RabbitMq, rabbitmq_missing, running_rabbitmq

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
RETAINED = (DEV.status, DEV.health, HERMES_SAY_FINISHED)


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMq]:
    """One node for the module (it takes many seconds to boot)."""
    reason = rabbitmq_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_rabbitmq(tmp_path_factory.mktemp("rabbitmq")) as node:
        yield node


@pytest.fixture()
def mqtt_broker(rabbitmq: RabbitMq) -> Iterator[RabbitMq]:
    """The module's node, with the retained topics a previous test left cleared."""
    with Recorder(rabbitmq.settings(), [], "cleaner") as cleaner:
        for topic in RETAINED:
            cleaner.publish(topic, b"", retain=True)
    yield rabbitmq


# The fixtures and tests of the Mosquitto suite, unchanged.
agent = test_mqtt_agent.agent
controller = test_mqtt_agent.controller
settings = test_mqtt_process.settings
agent_process = test_mqtt_process.agent_process
versions = test_reload_agent.versions
start_agent = test_reload_agent.start_agent

test_speak_accepted_started_finished = test_mqtt_agent.test_speak_accepted_started_finished
test_generated_id_is_reported_in_every_event = (
    test_mqtt_agent.test_generated_id_is_reported_in_every_event)
test_redelivered_command_is_spoken_once = test_mqtt_agent.test_redelivered_command_is_spoken_once
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


def test_send_wait_prints_the_final_event(mqtt_broker: RabbitMq, tiny_voice_dir: Path,
                                          tmp_path: Path) -> None:
    """The Mosquitto suite's test, with its MQTT 3.1.1 case (RabbitMQ 3.10 has no MQTT 5)."""
    test_mqtt_process.test_send_wait_prints_the_final_event(
        mqtt_broker, tiny_voice_dir, tmp_path, "3.1.1")  # type: ignore[arg-type]


def _json(message: InboundMessage) -> dict[str, Any]:
    try:
        return dict(json.loads(message.payload))
    except ValueError:
        return {}


def test_a_device_id_and_a_group_with_dots_are_answered(
        mqtt_broker: RabbitMq, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """RabbitMQ's MQTT plugin delivers a '.' in a topic as '/' (a command sent to
    ``tts/kiosk.1/cmd/ping`` reaches the device on ``tts/kiosk/1/cmd/ping``); the agent still
    knows its commands, and ``send --wait`` gets the answer."""
    device = Namespace("tts").device("kiosk.1")
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              device_id="kiosk.1", mqtt={"groups": ["floor.2"]})
    with Recorder(mqtt_broker.settings(), [TopicFilter("tts/#")], "ctl") as ctl, \
            running_agent(settings):
        ctl.wait_for(lambda m: _json(m).get("state") == "online")
        ctl.publish(device.command("ping"), {"id": "dot-1"})
        ctl.publish(Namespace("tts").group_command("floor.2", "ping"), {"id": "dot-2"})
        for request_id in ("dot-1", "dot-2"):
            final = _json(ctl.wait_for(
                lambda m, i=request_id: _json(m).get("id") == i and _json(m).get("final")))
            assert final["event"] == "pong" and final["device"] == "kiosk.1", final
        result = subprocess.run(
            [sys.executable, "-m", "agent", "send", "--device", "kiosk.1", "ping", "--wait",
             "--timeout", "20"], capture_output=True, text=True, env=agent_env(settings),
            timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.splitlines()[-1])["event"] == "pong"


def test_mqtt_5_is_refused_with_the_hint_to_use_3_1_1(mqtt_broker: RabbitMq, tiny_voice_dir: Path,
                                                      tmp_path: Path) -> None:
    """RabbitMQ 3.10 closes an MQTT 5 connection without a CONNACK: the one-line error says to
    try MQTT 3.1.1 (it said only to check TLS)."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": "5"})
    result = subprocess.run(
        [sys.executable, "-m", "agent", "send", "--device", "t1", "ping", "--timeout", "5"],
        capture_output=True, text=True, env=agent_env(settings), timeout=120, check=False)
    assert result.returncode == 3
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "-V 3.1.1" in result.stderr


def test_group_wait_without_retained_membership_prints_every_answer(
        mqtt_broker: RabbitMq, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """RabbitMQ 3.10 sends no retained message to a wildcard subscription, so ``send --group
    --wait`` learns no membership: it waits the plain way and still prints every answer
    (docs/fleet.md, "Brokers")."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"groups": ["lobby"]})
    with running_agent(settings), Recorder(mqtt_broker.settings(), [DEV.status.as_filter()],
                                           "watch") as watch:
        watch.wait_json(DEV.status, lambda p: p["state"] == "online")
        result = subprocess.run(
            [sys.executable, "-m", "agent", "send", "--group", "lobby", "ping", "--wait",
             "--timeout", "5"], capture_output=True, text=True, env=agent_env(settings),
            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    finals = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["device"], e["event"]) for e in finals] == [("t1", "pong")]
