"""Reconnects against a real Mosquitto: prompt after short outages, handshake failures logged as
warnings with a hint, and a second client with the agent's client id taking its session."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
import structlog
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from agent.mqtt.client import Backoff, MqttClient
from tests.support.broker import Broker, agent_settings, free_port, running_agent, running_broker

pytestmark = pytest.mark.broker

Entry = dict[str, Any]


class LogWatch:
    """A structlog processor that keeps every entry (any thread) and lets a test wait for one."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._cond = threading.Condition()

    def __call__(self, logger: Any, method: str, event_dict: Entry) -> Entry:
        with self._cond:
            self.entries.append(dict(event_dict))
            self._cond.notify_all()
        raise structlog.DropEvent

    def named(self, event: str, since: int = 0) -> list[Entry]:
        with self._cond:
            return [e for e in self.entries[since:] if e["event"] == event]

    def wait_for(self, predicate: Callable[[list[Entry]], bool], timeout: float = 30.0,
                 ) -> list[Entry]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.entries):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [(e["event"], e.get("level")) for e in self.entries[-40:]]
                    raise AssertionError(f"no matching log entry within {timeout}s; {seen}")
                self._cond.wait(remaining)
            return list(self.entries)

    def wait_event(self, event: str, count: int = 1, since: int = 0,
                   timeout: float = 30.0) -> list[Entry]:
        self.wait_for(lambda _: len(self.named(event, since)) >= count, timeout)
        return self.named(event, since)


@contextmanager
def watching_logs() -> Iterator[LogWatch]:
    """Every structlog entry, debug included, into a :class:`LogWatch` (config restored after)."""
    old = structlog.get_config()
    watch = LogWatch()
    structlog.configure(processors=[structlog.processors.add_log_level, watch],
                        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield watch
    finally:
        structlog.configure(**old)


@contextmanager
def started(client: MqttClient) -> Iterator[MqttClient]:
    client.start()
    try:
        yield client
    finally:
        client.close()


def test_after_many_short_outages_a_2s_outage_is_retried_at_the_base_delay(
        mqtt_broker: Broker) -> None:
    settings = mqtt_broker.settings(reconnect_min_s=0.5, reconnect_max_s=30.0)
    # the fast window is wide here so that a slow machine's broker start stays inside it
    backoff = Backoff(0.5, 30.0, random.Random(5), fast_s=20.0, stable_s=0.5)
    with watching_logs() as logs, started(MqttClient(settings, "blips", backoff=backoff)) as client:
        assert client.wait_ready(10), client.last_error
        for blip in range(4):  # short outages, each followed by a stable connection
            mqtt_broker.restart()
            assert client.wait_ready(15), client.last_error
            logs.wait_event("mqtt_connection_stable", count=blip + 1)
            assert backoff.attempt == 0
        outage = len(logs.entries)
        mqtt_broker.stop()
        threading.Event().wait(2.0)  # the outage itself, not a synchronisation
        mqtt_broker.start()
        back = len(logs.entries)
        assert client.wait_ready(15), client.last_error
        assert client.reconnects == 5
        waits = logs.named("mqtt_reconnect_wait", outage)
        attempts_at_reconnect = backoff.attempt
    assert len(waits) >= 2
    # every wait of the 2 s outage was capped at the base delay, none grew
    assert {w["ceiling_s"] for w in waits} == {0.5}
    # the count started afresh with this outage: the blips before left nothing behind
    assert [w["attempt"] for w in waits] == list(range(1, len(waits) + 1))
    assert attempts_at_reconnect in (len(waits), 0)  # 0: already stable again
    # once the broker listened again, the next attempt or the one after it connected
    assert len(logs.named("mqtt_reconnect_wait", back)) <= 2


def test_wrong_port_is_a_warning_with_a_hint_then_quieter(mqtt_broker: Broker) -> None:
    port = free_port()  # nothing listens there
    settings = mqtt_broker.settings(port=port)
    with watching_logs() as logs, started(MqttClient(settings, "wrong-port")) as client:
        failures = logs.wait_event("mqtt_connect_failed", count=3)
        assert not client.connected
    first, *again = failures
    assert first["level"] == "warning"
    assert f"is the broker running on 127.0.0.1:{port}?" in first["hint"]
    assert first["error"].startswith("ConnectionRefusedError")
    assert {e["level"] for e in again} == {"info"}  # the same failure again: not a new warning


def test_plain_client_to_a_tls_listener_is_a_warning_with_a_hint(tmp_path: Path) -> None:
    with running_broker(tmp_path / "tls", tls=True) as tls_broker:
        settings = tls_broker.settings(tls=False, ca_file=None)
        with watching_logs() as logs, started(MqttClient(settings, "plain-to-tls")) as client:
            (failure,) = logs.wait_event("mqtt_handshake_failed")
            assert not client.connected
            assert client.last_error == "connection closed before CONNACK"
    assert failure["level"] == "warning"
    assert "is this a TLS port? set mqtt.tls = true" in failure["hint"]
    assert failure["port"] == tls_broker.port


def test_tls_client_to_a_plain_listener_is_a_warning_with_a_hint(
        tmp_path: Path, mqtt_broker: Broker) -> None:
    with running_broker(tmp_path / "tls", tls=True) as tls_broker:
        settings = tls_broker.settings(port=mqtt_broker.port)
        with watching_logs() as logs, started(MqttClient(settings, "tls-to-plain")):
            failure = logs.wait_event("mqtt_connect_failed")[0]
    assert failure["level"] == "warning"
    assert "is it a TLS listener? (a plain MQTT port needs mqtt.tls = false)" in failure["hint"]


@contextmanager
def intruder(broker: Broker, client_id: str, protocol: str) -> Iterator[paho.Client]:
    """A plain paho client with ``client_id`` that reconnects quickly whenever it is kicked."""
    other = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                        protocol=(MQTTProtocolVersion.MQTTv5 if protocol == "5"
                                  else MQTTProtocolVersion.MQTTv311))
    other.reconnect_delay_set(min_delay=0.2, max_delay=0.4)
    other.connect_async(broker.host, broker.port)
    other.loop_start()
    try:
        yield other
    finally:
        other.disconnect()
        other.loop_stop()


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_a_second_client_with_the_agents_client_id_is_detected_logged_once_and_in_health(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, protocol: str) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": protocol})
    with watching_logs() as logs, running_agent(settings) as service:
        client = service.client
        assert client is not None and client.wait_ready(10), client and client.last_error
        assert service.health.snapshot()["state"] == "ok"
        with intruder(mqtt_broker, client.client_id, protocol):
            (warning,) = logs.wait_event("mqtt_session_taken_over")
            detected = len(logs.entries)
            # it goes on (both keep reconnecting), but it is reported once per episode
            logs.wait_event("mqtt_disconnected", count=2, since=detected)
            snap = service.health.snapshot()
        taken_over = logs.named("mqtt_session_taken_over")
        later = logs.named("mqtt_disconnected", detected)
    assert len(taken_over) == 1
    assert warning["level"] == "warning" and warning["client_id"] == "tts-agent-t1"
    assert "device_id" in warning["hint"] and "client id" in warning["hint"]
    assert snap["state"] == "degraded"
    reason = next(r for r in snap["reasons"] if r.startswith("mqtt not ok"))
    assert "session taken over repeatedly" in reason and "'tts-agent-t1'" in reason
    mqtt: Any = snap["mqtt"]
    assert mqtt["state"] == "degraded" and mqtt["reason"] in reason
    assert mqtt["takeovers"] >= 3
    # the disconnects of a known episode are no longer warnings
    assert {e["level"] for e in later} == {"info"}
