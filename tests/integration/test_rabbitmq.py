"""The agent on a second, independent broker: RabbitMQ's MQTT plugin (Debian's
``rabbitmq-server``, 3.10: MQTT 3.1.1 only), started by the test (issue #18;
``tests.support.other_brokers.RabbitMq``, whose settings say ``protocol = "3.1.1"``).

What only RabbitMQ needs testing is here. The end-to-end tests of the Mosquitto suite run on it
too, where they are: those marked ``@pytest.mark.brokers(..., "rabbitmq")``
(``tests/support/broker_matrix.py``: one node for the session, skipped when the package is
missing except in CI), their ids ending in ``[rabbitmq]``. Those that need MQTT 5 (Response
Topic) or a retained message on a wildcard subscription (RabbitMQ 3.10 delivers retained
messages only on exact topics) are not among them; docs/fleet.md, "Brokers", says what
differs. ``fleet`` and ``send --group --wait`` learn the fleet there from a ping instead
(``--probe auto``): tested here.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.client import InboundMessage
from agent.mqtt.topics import Namespace, TopicFilter
from tests.integration import test_mqtt_process
from tests.support.broker import Recorder, agent_env, agent_settings, daemon, running_agent
from tests.support.broker_matrix import broker_fixture
from tests.support.cli import AGENT, agent_cli
from tests.support.other_brokers import RabbitMq

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")


mqtt_broker = broker_fixture("rabbitmq")
"""The session's node, with the retained topics a previous test left cleared."""


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
        result = agent_cli("send", "--device", "kiosk.1", "ping", "--wait", "--timeout", "20",
                           env=agent_env(settings), timeout=120)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.splitlines()[-1])["event"] == "pong"


def test_mqtt_5_is_refused_with_the_hint_to_use_3_1_1(mqtt_broker: RabbitMq, tiny_voice_dir: Path,
                                                      tmp_path: Path) -> None:
    """RabbitMQ 3.10 closes an MQTT 5 connection without a CONNACK: the one-line error says to
    try MQTT 3.1.1 (it said only to check TLS)."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": "5"})
    result = agent_cli("send", "--device", "t1", "ping", "--timeout", "5",
                       env=agent_env(settings), timeout=120)
    assert result.returncode == 3
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "-V 3.1.1" in result.stderr


def _tts(settings: Any, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=agent_env(settings), timeout=timeout)


def _device(broker: RabbitMq, models: Path, work: Path, device: str, *groups: str) -> Any:
    return agent_settings(broker, models, work / device, device_id=device,
                          mqtt={"groups": list(groups)})


def _wait_online(broker: RabbitMq, device: str) -> None:
    topic = Namespace("tts").device(device).status  # an exact topic: retained delivered
    with Recorder(broker.settings(), [topic.as_filter()], f"watch-{device}") as watch:
        watch.wait_json(topic, lambda p: p["state"] == "online", timeout=60)


@pytest.fixture()
def lobby(mqtt_broker: RabbitMq, tiny_voice_dir: Path, tmp_path: Path) -> Iterator[Any]:
    """rb-1 (lobby) and rb-2 (lobby, hall) running; the controller's settings."""
    models = tiny_voice_dir.parent
    with running_agent(_device(mqtt_broker, models, tmp_path, "rb-1", "lobby")), \
            running_agent(_device(mqtt_broker, models, tmp_path, "rb-2", "lobby", "hall")):
        for device in ("rb-1", "rb-2"):
            _wait_online(mqtt_broker, device)
        yield _device(mqtt_broker, models, tmp_path, "controller")


@pytest.mark.slow
def test_fleet_lists_the_devices_that_answer_its_ping(lobby: Any) -> None:
    """RabbitMQ 3.10 sends no retained message to a wildcard subscription: ``fleet`` finds no
    device there, pings the fleet and lists those that answered, with their groups."""
    result = _tts(lobby, "fleet", "--json", "--settle", "3")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    devices = {d["device"]: d for d in document["devices"]}
    assert set(devices) >= {"rb-1", "rb-2"}, result.stdout
    assert devices["rb-1"]["state"] == "online" and devices["rb-1"]["groups"] == ["lobby"]
    assert devices["rb-2"]["groups"] == ["lobby", "hall"]
    assert devices["rb-2"]["voice"] == "tiny-test" and devices["rb-2"]["health"] is not None
    assert document["answered_ping"] >= 2
    result = _tts(lobby, "fleet", "--group", "hall", "--settle", "3")
    assert result.returncode == 0, result.stderr
    assert [line.split()[:3] for line in result.stdout.splitlines()[1:]] == [
        ["rb-2", "online", "lobby,hall"]], result.stdout
    assert "pinged the fleet; " in result.stderr, result.stderr
    result = _tts(lobby, "fleet", "--probe", "never", "--settle", "1")
    assert result.returncode == 0 and result.stdout.splitlines()[1:] == [], result.stdout


def test_group_speak_accounts_for_every_member(lobby: Any) -> None:
    """The membership comes from the ping's answers: the wait ends once both members finished
    (not at the 600 s --timeout, which would outlast the bound on the command)."""
    result = _tts(lobby, "send", "--group", "lobby", "speak", "Doors closing.", "--wait",
                  "--timeout", "600", "--settle", "3")
    assert result.returncode == 0, result.stderr
    finals = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((e["device"], e["event"]) for e in finals) == [
        ("rb-1", "finished"), ("rb-2", "finished")]
    assert "group lobby: 2 expected (online), 2 answered: 2 succeeded, 0 failed, 0 no answer" \
        in result.stderr, result.stderr


@pytest.mark.slow
def test_group_speak_with_a_member_stopped_names_it(
        lobby: Any, mqtt_broker: RabbitMq, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """rb-3 answers the probe's ping, then is frozen (SIGSTOP) before the speak is sent (the
    ``--settle`` quiet after the last answer): the account names it and exits 3."""
    stuck = _device(mqtt_broker, tiny_voice_dir.parent, tmp_path, "rb-3", "lobby")
    events = Namespace("tts").all_events()
    with daemon(stuck, tmp_path / "rb-3.log") as process, \
            Recorder(mqtt_broker.settings(), [events], "events") as watch:
        _wait_online(mqtt_broker, "rb-3")
        send = subprocess.Popen(
            [*AGENT, "send", "--group", "lobby", "speak", "Doors closing.",
             "--wait", "--timeout", "10", "--settle", "8"], env=agent_env(lobby),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            watch.wait_for(lambda m: _json(m).get("event") == "pong"
                           and _json(m).get("device") == "rb-3", timeout=60)
            process.send_signal(signal.SIGSTOP)
            stdout, stderr = send.communicate(timeout=120)
        finally:
            process.send_signal(signal.SIGCONT)
            if send.poll() is None:
                send.kill()
    assert send.returncode == 3, stderr
    assert sorted(json.loads(line)["device"] for line in stdout.splitlines()) == ["rb-1", "rb-2"]
    lines = stderr.splitlines()
    assert "3 expected (online), 2 answered: 2 succeeded, 0 failed, 1 no answer within 10 s" \
        in lines[0], stderr
    assert "tts-agent send: no answer: rb-3" in lines, stderr
