"""A bare paho client that publishes what the agent's own types refuse to build.

:class:`agent.mqtt.topics.Topic` rejects over-long topics and the agent's client only
publishes ``Topic`` values, so a test that needs a hostile sender (a topic past the agent's
limit, arbitrary payload bytes) publishes through this plain paho connection instead, as a
controller or ``mosquitto_pub`` would.
"""

from __future__ import annotations

import contextlib
import threading
from types import TracebackType
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.support.broker import Broker

CONNECT_TIMEOUT_S = 10.0


class RawPublisher:
    """One MQTT 5 connection to ``broker`` that publishes raw topic strings and bytes (QoS 1)."""

    def __init__(self, broker: Broker, client_id: str = "raw-publisher") -> None:
        self._client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                   protocol=paho.MQTTv5)
        self._broker = broker
        self._connected = threading.Event()
        self._client.on_connect = self._on_connect

    def _on_connect(self, *args: Any) -> None:
        self._connected.set()

    def __enter__(self) -> RawPublisher:
        self._client.connect(self._broker.host, self._broker.port, keepalive=30)
        self._client.loop_start()
        if not self._connected.wait(CONNECT_TIMEOUT_S):
            self.__exit__(None, None, None)
            raise RuntimeError("raw publisher could not connect")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._client.disconnect()
        with contextlib.suppress(AttributeError):  # paho clears its thread as it ends: a race
            self._client.loop_stop()

    def publish(self, topic: str, payload: bytes, timeout: float = CONNECT_TIMEOUT_S, *,
                response_topic: str | None = None, correlation: bytes | None = None) -> None:
        """Publish and wait for the broker's PUBACK (raises when it does not come); with an
        MQTT 5 Response Topic and Correlation Data when given."""
        properties = None
        if response_topic is not None:
            properties = Properties(PacketTypes.PUBLISH)
            properties.ResponseTopic = response_topic
            if correlation is not None:
                properties.CorrelationData = correlation
        info = self._client.publish(topic, payload, qos=1, properties=properties)
        info.wait_for_publish(timeout)
        if not info.is_published():
            raise RuntimeError(f"publish to {topic[:80]!r} not acknowledged")
