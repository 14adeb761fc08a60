"""The MQTT client against a real Mosquitto: sessions, reconnects, TLS, mutual TLS, passwords."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from agent.mqtt.client import (
    Backoff,
    ClientConfigError,
    InboundMessage,
    MqttClient,
    OutboundMessage,
)
from agent.mqtt.topics import Topic, TopicFilter
from tests.support.broker import Broker, Certificates, Recorder, running_broker

pytestmark = pytest.mark.broker

T = Topic("test/a")


class Inbox:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.cond = threading.Condition()

    def __call__(self, message: InboundMessage) -> None:
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()

    def wait_count(self, count: int, timeout: float = 15.0) -> list[InboundMessage]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.messages) >= count, timeout)
            return list(self.messages)


def test_backoff_full_jitter_bounds() -> None:
    backoff = Backoff(0.5, 8.0, random.Random(7))
    assert [backoff.ceiling(n) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    delays = [backoff.delay(5) for _ in range(200)]
    assert all(0.0 <= d <= 8.0 for d in delays)
    assert min(delays) < 2.0 and max(delays) > 6.0  # spread over the whole window
    assert backoff.ceiling(10_000) == 8.0
    with pytest.raises(ValueError):
        Backoff(0, 1)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_roundtrip_with_properties(mqtt_broker: Broker, protocol: str) -> None:
    inbox = Inbox()
    settings = mqtt_broker.settings(protocol=protocol)
    receiver = MqttClient(settings, "rx", subscriptions=[T.as_filter()], on_message=inbox)
    receiver.start()
    try:
        assert receiver.wait_ready(10), receiver.last_error
        with Recorder(settings, [], client_id="tx") as sender:
            sender.publish(T, b"hello", response_topic=Topic("test/reply"),
                           correlation_data=b"\x01\x02", expiry_s=60)
        (message,) = inbox.wait_count(1)
    finally:
        receiver.close()
    assert message.topic == T and message.payload == b"hello"
    if protocol == "5":
        assert message.response_topic == "test/reply"
        assert message.correlation_data == b"\x01\x02"
        assert message.expiry_s is not None and 0 < message.expiry_s <= 60
    else:
        assert (message.response_topic, message.correlation_data, message.expiry_s) == (
            None, None, None)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_persistent_session_gets_messages_sent_while_away(mqtt_broker: Broker,
                                                          protocol: str) -> None:
    settings = mqtt_broker.settings(protocol=protocol)
    first = MqttClient(settings, "persistent-1", subscriptions=[T.as_filter()])
    first.start()
    assert first.wait_ready(10), first.last_error
    first.close()
    with Recorder(settings, [], client_id="tx") as sender:
        for n in range(3):
            sender.publish(T, f"m{n}")
    inbox = Inbox()
    again = MqttClient(settings, "persistent-1", subscriptions=[T.as_filter()], on_message=inbox)
    again.start()
    try:
        got = inbox.wait_count(3)
    finally:
        again.close()
    assert [m.payload for m in got] == [b"m0", b"m1", b"m2"]


def test_clean_session_client_gets_nothing_queued(mqtt_broker: Broker) -> None:
    settings = mqtt_broker.settings()
    first = MqttClient(settings, "ephemeral", subscriptions=[T.as_filter()], persistent=False)
    first.start()
    assert first.wait_ready(10)
    first.close()
    with Recorder(settings, [], client_id="tx") as sender:
        sender.publish(T, "lost")
    inbox = Inbox()
    again = MqttClient(settings, "ephemeral", subscriptions=[T.as_filter()], on_message=inbox,
                       persistent=False)
    again.start()
    try:
        assert again.wait_ready(10)
        with Recorder(settings, [], client_id="tx") as sender:
            sender.publish(T, "fresh")
        got = inbox.wait_count(1)
    finally:
        again.close()
    assert [m.payload for m in got] == [b"fresh"]


def test_reconnects_after_broker_restart_and_flushes_offline_publishes(
        mqtt_broker: Broker) -> None:
    settings = mqtt_broker.settings()
    offline_topic = Topic("test/offline")
    client = MqttClient(settings, "restart-me", subscriptions=[T.as_filter()])
    client.start()
    try:
        with Recorder(settings, [offline_topic.as_filter()], "watch", persistent=True) as watcher:
            assert client.wait_ready(10)
            mqtt_broker.stop()
            publication = client.publish(OutboundMessage(offline_topic, b"queued"))
            assert not publication.dropped
            assert not publication.wait(0.5)
            mqtt_broker.start()
            assert client.wait_ready(15), client.last_error
            assert publication.wait(10)
            assert client.reconnects == 1
            watcher.wait_for(lambda m: m.payload == b"queued")
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_last_will_on_abrupt_loss(mqtt_broker: Broker, protocol: str) -> None:
    settings = mqtt_broker.settings(protocol=protocol, keepalive_s=5)
    will = OutboundMessage(Topic("test/status"), b"offline", retain=True)
    with Recorder(settings, [Topic("test/status").as_filter()], "watch") as watcher:
        client = MqttClient(settings, "mortal", will=will)
        client.start()
        assert client.wait_ready(10)
        client._paho.socket().close()  # a dying process: no DISCONNECT packet
        message = watcher.wait_for(lambda m: m.topic == Topic("test/status"))
        client.close()
    assert message.payload == b"offline"


def test_clean_close_sends_final_message_and_no_will(mqtt_broker: Broker) -> None:
    settings = mqtt_broker.settings()
    status = Topic("test/status")
    will = OutboundMessage(status, b"offline", retain=True)
    with Recorder(settings, [status.as_filter()], "watch") as watcher:
        client = MqttClient(settings, "polite", will=will)
        client.start()
        assert client.wait_ready(10)
        client.close(final=OutboundMessage(status, b"stopped", retain=True))
        watcher.wait_for(lambda m: m.payload == b"stopped")
        threading.Event().wait(0.5)  # a will would arrive right after the disconnect
        payloads = [m.payload for m in watcher.messages]
    assert payloads == [b"stopped"]


def test_tls_with_ca_verification(tmp_path: Path) -> None:
    with running_broker(tmp_path / "b", tls=True) as tls_broker:
        with Recorder(tls_broker.settings(), [T.as_filter()], "tls-rx") as rx:
            rx.publish(T, "over tls")
            rx.wait_for(lambda m: m.payload == b"over tls")
        assert tls_broker.certs is not None
        # a client that trusts another CA refuses the broker's certificate
        foreign = Certificates.make(tmp_path / "other-ca")
        client = MqttClient(tls_broker.settings(ca_file=foreign.ca), "tls-wrong-ca")
        client.start()
        try:
            assert not client.wait_ready(2)
            assert "CERTIFICATE_VERIFY_FAILED" in (client.last_error or "")
        finally:
            client.close()


def test_mutual_tls(tmp_path: Path) -> None:
    with running_broker(tmp_path / "b", mutual_tls=True) as mtls:
        assert mtls.certs is not None
        without = MqttClient(mtls.settings(), "no-client-cert")
        without.start()
        try:
            assert not without.wait_ready(2)
        finally:
            without.close()
        settings = mtls.settings(cert_file=mtls.certs.client_cert, key_file=mtls.certs.client_key)
        with Recorder(settings, [T.as_filter()], "mtls-rx") as rx:
            rx.publish(T, "mutual")
            rx.wait_for(lambda m: m.payload == b"mutual")


def test_password_from_file_and_wrong_password(tmp_path: Path) -> None:
    secret = "s3cr3t-Pa55"  # noqa: S105 - a test broker's password
    pw_file = tmp_path / "mqtt-password"
    pw_file.write_text(secret + "\n", encoding="utf-8")
    with running_broker(tmp_path / "b", users={"agent": secret}) as auth:
        settings = auth.settings(username="agent", password_file=pw_file)
        with Recorder(settings, [T.as_filter()], "auth-rx") as rx:
            rx.publish(T, "authenticated")
            rx.wait_for(lambda m: m.payload == b"authenticated")
        wrong = MqttClient(auth.settings(username="agent", password="nope"), "auth-wrong")  # noqa: S106
        wrong.start()
        try:
            assert not wrong.wait_ready(2)
            assert wrong.last_error is not None and "refused" in wrong.last_error
            assert "nope" not in wrong.last_error
        finally:
            wrong.close()
        anonymous = MqttClient(auth.settings(), "auth-anon")
        anonymous.start()
        try:
            assert not anonymous.wait_ready(2)
        finally:
            anonymous.close()


def test_unreadable_password_file_is_a_clear_error(tmp_path: Path, mqtt_broker: Broker) -> None:
    with pytest.raises(ClientConfigError, match="cannot read the MQTT password file"):
        MqttClient(mqtt_broker.settings(username="u", password_file=tmp_path / "missing"), "x")


def test_handler_exception_does_not_kill_the_loop(mqtt_broker: Broker) -> None:
    inbox = Inbox()

    def flaky(message: InboundMessage) -> None:
        if message.payload == b"boom":
            raise RuntimeError("handler bug")
        inbox(message)

    settings = mqtt_broker.settings()
    client = MqttClient(settings, "flaky", subscriptions=[TopicFilter("test/#")], on_message=flaky)
    client.start()
    try:
        assert client.wait_ready(10)
        with Recorder(settings, [], "tx") as tx:
            tx.publish(T, "boom")
            tx.publish(T, "fine")
        assert [m.payload for m in inbox.wait_count(1)] == [b"fine"]
    finally:
        client.close()
