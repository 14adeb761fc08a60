"""Brokers other than one plain Mosquitto, for the tests that the agent runs on any standard
broker (issue #18): RabbitMQ's MQTT plugin (Debian's ``rabbitmq-server``, MQTT 3.1.1 only) and
two Mosquitto brokers bridged to each other.

Each has the :class:`tests.support.broker.Broker` surface the tests use: ``host``, ``port``,
``settings(**extra)`` (the controller's side: ``Recorder``, ``send``, ``fleet``) and
``device_settings(**extra)`` (what :func:`tests.support.broker.agent_settings` gives agents),
``start``, ``stop``, ``log_text``. On a bridged pair the two differ: devices on one broker,
the controller on the other.

RabbitMQ runs as the test's user from a temporary directory: its own node name, AMQP, MQTT,
Erlang distribution and epmd ports (all on 127.0.0.1, chosen free), its data and logs, and an
``enabled_plugins`` file naming ``rabbitmq_mqtt``; anonymous MQTT logins. Without the package
:func:`rabbitmq_missing` gives the reason to skip, except in CI (``CI=true``), where the
package is installed by ``build.sh`` and its absence fails the tests.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.settings import MqttSettings
from tests.support.broker import CLIENT_DEFAULTS, Broker, BrokerProcess, free_port

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
RABBITMQ_SERVER = RABBITMQ_BIN / "rabbitmq-server"
EPMD = Path("/usr/bin/epmd")
RABBITMQ_START_TIMEOUT_S = 180.0
"""A RabbitMQ node takes many seconds to boot on a small, busy machine."""

AGENT_TOPICS = ("tts/#", "hermes/#", "homeassistant/#")
"""What the bridge carries both ways: the agent's topics under the default prefixes."""


def rabbitmq_missing() -> str | None:
    """Why the RabbitMQ tests cannot run here, or ``None``. In CI a missing broker is a
    failure, not a skip (``build.sh`` installs ``rabbitmq-server``)."""
    if RABBITMQ_SERVER.is_file():
        return None
    reason = f"RabbitMQ is not installed ({RABBITMQ_SERVER}): apt-get install rabbitmq-server"
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{reason} (CI must run the RabbitMQ tests)")
    return reason


def _wait_for_port(host: str, port: int, timeout: float, alive: Any) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the broker exited before it listened")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            pause.wait(0.2)
    raise RuntimeError(f"nothing listened on {host}:{port} within {timeout:.0f} s")


@dataclass
class RabbitMq(BrokerProcess):
    """One RabbitMQ node with the MQTT plugin, its MQTT listener on ``127.0.0.1:port``."""

    dir: Path
    port: int = field(default_factory=free_port)
    amqp_port: int = field(default_factory=free_port)
    dist_port: int = field(default_factory=free_port)
    epmd_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    host = "127.0.0.1"

    @property
    def node(self) -> str:
        return f"tts-test-{self.port}@localhost"

    @property
    def log_path(self) -> Path:
        return self.dir / "log" / "node.log"

    def env(self) -> dict[str, str]:
        """The node's environment: every port, path and name of its own."""
        return {**os.environ, "HOME": str(self.dir), "RABBITMQ_NODENAME": self.node,
                "RABBITMQ_NODE_IP_ADDRESS": self.host, "RABBITMQ_NODE_PORT": str(self.amqp_port),
                "RABBITMQ_DIST_PORT": str(self.dist_port), "ERL_EPMD_PORT": str(self.epmd_port),
                "ERL_EPMD_ADDRESS": self.host, "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
                "RABBITMQ_LOG_BASE": str(self.dir / "log"), "RABBITMQ_LOGS": str(self.log_path),
                "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq.conf"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
                "RABBITMQ_PLUGINS_EXPAND_DIR": str(self.dir / "plugins-expand"),
                "RABBITMQ_PID_FILE": str(self.dir / "rabbitmq.pid")}

    def write_config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "enabled_plugins").write_text("[rabbitmq_mqtt].\n", encoding="utf-8")
        (self.dir / "rabbitmq.conf").write_text("\n".join([
            f"listeners.tcp.default = {self.host}:{self.amqp_port}",
            f"mqtt.listeners.tcp.default = {self.host}:{self.port}",
            "mqtt.allow_anonymous = true",
            "loopback_users = none",
            "log.console = false",
            "log.file.level = info",
        ]) + "\n", encoding="utf-8")

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("broker already running")
        self.write_config()
        self.process = subprocess.Popen(
            [str(RABBITMQ_SERVER)], env=self.env(), cwd=self.dir,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            _wait_for_port(self.host, self.port, RABBITMQ_START_TIMEOUT_S,
                           lambda: self.process is not None and self.process.poll() is None)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"RabbitMQ did not start: {exc}\n{self.log_text()[-4000:]}") from exc

    def stop(self) -> None:
        """SIGTERM the node's script (it stops the node), then end this node's own epmd."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(10)
            self.process = None
        if EPMD.exists():
            subprocess.run([str(EPMD), "-kill"], env=self.env(), capture_output=True,
                           timeout=30, check=False)

    def settings(self, **extra: Any) -> MqttSettings:
        """Client settings: MQTT 3.1.1 (RabbitMQ 3.10 has no MQTT 5), the tests' fast retries."""
        values: dict[str, Any] = {"host": self.host, "port": self.port, "protocol": "3.1.1",
                                  **CLIENT_DEFAULTS, **extra}
        return MqttSettings(**values)


@contextmanager
def running_rabbitmq(directory: Path) -> Iterator[RabbitMq]:
    broker = RabbitMq(directory)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@dataclass
class BridgedPair(BrokerProcess):
    """Two Mosquitto brokers: ``devices`` (A) where the agents connect, and ``controllers`` (B)
    where the controller does, B's configuration bridging the agent topics both ways to A
    (MQTT 5 bridge, so Response Topic and Correlation Data cross it too)."""

    devices: Broker
    controllers: Broker

    host = "127.0.0.1"

    @property
    def port(self) -> int:
        return self.controllers.port

    def bridge_lines(self) -> list[str]:
        a = self.devices
        return ["connection devices", f"address {a.host}:{a.port}",
                "bridge_protocol_version mqttv50", "cleansession false",
                f"remote_clientid bridge-{self.controllers.port}", "try_private true",
                "restart_timeout 1 2", *(f"topic {pattern} both 1" for pattern in AGENT_TOPICS)]

    def start(self) -> None:
        self.devices.start()
        self.controllers.start()

    def stop(self) -> None:
        self.controllers.stop()
        self.devices.stop()

    def log_text(self) -> str:
        return f"{self.devices.log_text()}\n--- controllers ---\n{self.controllers.log_text()}"

    def settings(self, **extra: Any) -> MqttSettings:
        """The controller's side (broker B)."""
        return self.controllers.settings(**extra)

    def device_settings(self, **extra: Any) -> MqttSettings:
        """The devices' side (broker A)."""
        return self.devices.settings(**extra)


@contextmanager
def running_bridged_pair(directory: Path) -> Iterator[BridgedPair]:
    """Broker A (devices) and broker B (controllers, bridged to A), both up and the bridge
    connected when the block starts."""
    devices = Broker(directory / "devices", free_port())
    controllers = _BridgingBroker(directory / "controllers", free_port())
    pair = BridgedPair(devices, controllers)
    controllers.bridge = pair.bridge_lines()
    for broker in (devices, controllers):
        broker.dir.mkdir(parents=True, exist_ok=True)
    pair.start()
    try:
        _wait_for_bridge(pair)
        yield pair
    finally:
        pair.stop()


@dataclass
class _BridgingBroker(Broker):
    bridge: list[str] = field(default_factory=list)

    def write_config(self) -> None:
        super().write_config()
        with self.config_path.open("a", encoding="utf-8") as config:
            config.write("\n".join(self.bridge) + "\n")


def _wait_for_bridge(pair: BridgedPair, timeout: float = 30.0) -> None:
    """Until a message published on A arrives on B (the bridge is up and subscribed)."""
    from agent.mqtt.topics import Topic
    from tests.support.broker import Recorder

    probe = Topic("tts/bridge-probe/status")
    deadline = time.monotonic() + timeout
    with Recorder(pair.settings(), [probe.as_filter()], "bridge-probe-b") as on_b, \
            Recorder(pair.device_settings(), [], "bridge-probe-a") as on_a:
        while True:
            on_a.publish(probe, b"probe")
            try:
                on_b.wait_for(lambda message: True, timeout=0.5)
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the bridge did not connect\n"
                                       f"{pair.log_text()[-3000:]}") from None
