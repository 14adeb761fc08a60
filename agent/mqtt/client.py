"""A paho-mqtt 2.x client that behaves well in a fleet.

A stable client id, QoS 1 subscriptions re-made after every connect and a persistent session, so
commands sent while the device was briefly away are delivered; publishing never blocks. How it
connects is :mod:`agent.mqtt.connect`, when it retries :mod:`agent.mqtt.reconnect`. One network
thread, ``mqtt-network``, runs every paho callback (handlers only convert and hand on) and every
socket write. Design: docs/internals.md#the-mqtt-client.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from agent.logs import get_logger
from agent.mqtt.connect import MAX_QUEUED_MESSAGES, ClientConfigError, new_paho
from agent.mqtt.limits import MAX_PAYLOAD_BYTES, batches
from agent.mqtt.reconnect import Backoff, ConnectionMonitor
from agent.mqtt.refused import RefusedTopicMessage, hand_on_refused
from agent.mqtt.topics import Topic, TopicError, TopicFilter
from agent.settings import MqttSettings

__all__ = ["MAX_QUEUED_MESSAGES", "Backoff", "ClientConfigError", "InboundMessage", "MqttClient",
           "OutboundMessage", "Publication"]

log = get_logger(__name__)

_LOOP_TIMEOUT_S = 0.5
_SUBSCRIBE_OPTIONS_5 = SubscribeOptions(qos=1, retainAsPublished=True,
                                        retainHandling=SubscribeOptions.RETAIN_SEND_IF_NEW_SUB)


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message as received, converted from paho's type on the network thread."""

    topic: Topic
    payload: bytes
    retain: bool
    """The retain flag as published (MQTT 5: subscriptions ask for Retain-As-Published);
    with 3.1.1 only a retained message delivered on subscribe has it."""
    duplicate: bool
    """Set by the broker on a QoS 1 redelivery."""
    response_topic: str | None
    """MQTT 5 Response Topic, unvalidated (the receiver decides whether to answer there)."""
    correlation_data: bytes | None
    expiry_s: int | None
    """MQTT 5 Message Expiry Interval as delivered: the seconds the message has left."""
    received: float
    """``time.monotonic()`` at receipt."""


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A message to publish."""

    topic: Topic
    payload: bytes
    qos: int = 1
    retain: bool = False
    response_topic: Topic | None = None
    correlation_data: bytes | None = None
    expiry_s: int | None = None
    """Message Expiry Interval (MQTT 5; ignored with 3.1.1)."""

    def properties(self) -> Properties | None:
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        used = False
        if self.response_topic is not None:
            props.ResponseTopic = self.response_topic.value
            used = True
        if self.correlation_data is not None:
            props.CorrelationData = self.correlation_data
            used = True
        if self.expiry_s is not None:
            props.MessageExpiryInterval = self.expiry_s
            used = True
        return props if used else None


class Publication:
    """A published message; :meth:`wait` blocks until the broker acknowledged it."""

    def __init__(self, mid: int | None, acked: threading.Event) -> None:
        self.mid = mid
        self._acked = acked

    @property
    def dropped(self) -> bool:
        """True when the message was not queued (outgoing queue full, or over the size limit);
        it cannot be waited for."""
        return self.mid is None

    def wait(self, timeout: float) -> bool:
        """True once the broker has acknowledged the message (QoS 1) or it was sent (QoS 0)."""
        return self._acked.wait(timeout)


class MqttClient:
    """One MQTT connection with its own network thread. See the module docstring.

    ``on_message`` and ``on_connected`` run on the network thread. ``persistent=False`` makes
    a throw-away session (used by ``tts-agent send``).
    """

    def __init__(
        self,
        settings: MqttSettings,
        client_id: str,
        *,
        subscriptions: Sequence[TopicFilter] = (),
        on_message: Callable[[InboundMessage], None] | None = None,
        on_refused_topic: Callable[[RefusedTopicMessage], None] | None = None,
        on_connected: Callable[[bool], None] | None = None,
        will: OutboundMessage | None = None,
        persistent: bool = True,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self.client_id = client_id
        self.mqtt5 = settings.protocol == "5"
        self._subscriptions = tuple(subscriptions)
        self._on_message = on_message
        self._on_refused_topic = on_refused_topic  # over-long topics (agent.mqtt.refused)
        self._on_connected = on_connected
        self._persistent = persistent
        self.monitor = ConnectionMonitor(settings, client_id,
                                         backoff or Backoff.for_settings(settings))
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._connected = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._connects = 0
        self._pending_subs: dict[int, tuple[TopicFilter, ...]] = {}  # SUBSCRIBE mid: filters
        self._ack_lock = threading.Lock()
        self._ack_waiters: dict[int, threading.Event] = {}
        self._early_acks: set[int] = set()
        self.turns = 0
        """Turns of the network thread's loop: one per ``loop()`` pass, per slice of a backoff
        wait and per connect attempt (progress counter for the health watchdog)."""
        self.busy_since: float | None = None
        """``time.monotonic()`` when the current connect attempt began, ``None`` otherwise
        (a connect that never returns counts as a stall)."""
        self._paho = self._make_paho(will)

    # -- setup ---------------------------------------------------------------------------

    def _make_paho(self, will: OutboundMessage | None) -> paho.Client:
        """The paho client (:func:`agent.mqtt.connect.new_paho`) with our callbacks."""
        client = new_paho(self.settings, self.client_id, persistent=self._persistent, will=will)
        client.on_connect = self._handle_connect
        client.on_disconnect = self._handle_disconnect
        client.on_subscribe = self._handle_subscribe
        client.on_message = self._handle_message
        client.on_publish = self._handle_publish
        return client

    # -- public API ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the network thread; it connects and keeps reconnecting until :meth:`close`."""
        if self._thread is not None:
            raise RuntimeError("client already started")
        self._thread = threading.Thread(target=self._run, name="mqtt-network", daemon=True)
        self._thread.start()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def alive(self) -> bool:
        """Whether the network thread runs (False before :meth:`start` and after :meth:`close`)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def last_error(self) -> str | None:  # kept after recovery; never holds a secret
        return self.monitor.last_error

    @property
    def reconnects(self) -> int:
        """Successful connections after the first one."""
        return max(0, self._connects - 1)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until connected and every subscription is acknowledged."""
        return self._ready.wait(timeout)

    def add_subscriptions(self, filters: Sequence[TopicFilter]) -> None:
        """Follow ``filters`` too (before :meth:`start`, or at once when connected). Any thread."""
        new = tuple(f for f in filters if f not in self._subscriptions)
        if not new:
            return
        self._subscriptions = (*self._subscriptions, *new)
        if self.connected:
            self._subscribe(new)

    def publish(self, message: OutboundMessage) -> Publication:
        """Queue ``message`` for sending; never blocks on the network. Any thread."""
        acked = threading.Event()
        if (size := len(message.payload)) > MAX_PAYLOAD_BYTES:  # brokers enforcing it disconnect
            log.error("mqtt_publish_too_large", topic=message.topic.value, bytes=size)
            return Publication(None, acked)
        try:
            info = self._paho.publish(
                message.topic.value, message.payload, message.qos, message.retain,
                message.properties() if self.mqtt5 else None,
            )
        except OSError as exc:
            # paho queued the packet but could not wake the network thread (its wake-up socket
            # was being replaced by a reconnect); the thread sends it on its next pass.
            log.debug("mqtt_publish_wakeup_failed", topic=message.topic.value, error=str(exc))
            return Publication(None, acked)
        if info.rc == MQTTErrorCode.MQTT_ERR_QUEUE_SIZE:
            log.warning("mqtt_publish_dropped", topic=message.topic.value,
                        reason="outgoing queue full")
            return Publication(None, acked)
        with self._ack_lock:
            if info.mid in self._early_acks:
                self._early_acks.discard(info.mid)
                acked.set()
            else:
                self._ack_waiters[info.mid] = acked
        return Publication(info.mid, acked)

    def close(self, timeout: float = 5.0, final: OutboundMessage | None = None) -> None:
        """Publish ``final`` (if connected), disconnect cleanly (no Last Will), stop the thread.
        Any thread but the network thread."""
        deadline = time.monotonic() + timeout
        if (final is not None and self.connected
                and not self.publish(final).wait(max(0.0, deadline - time.monotonic()))):
            log.warning("mqtt_final_message_unacknowledged", topic=final.topic.value)
        self._stop.set()
        self._paho.disconnect()
        thread = self._thread
        if thread is not None:
            thread.join(max(0.1, deadline - time.monotonic()))
            if thread.is_alive():
                self._abort.set()
                thread.join(2 * _LOOP_TIMEOUT_S + 0.5)
        self._connected.clear()
        self._ready.clear()

    # -- network thread ------------------------------------------------------------------

    def _run(self) -> None:
        """Network thread: connect, run paho's loop, wait a jittered backoff, reconnect."""
        while not self._stop.is_set():
            self.turns += 1
            self.busy_since = time.monotonic()
            self.monitor.attempting()
            try:
                self._paho.reconnect()
            except Exception as exc:  # the network thread must survive anything
                self.monitor.attempt_failed(exc)
            else:
                self.busy_since = None
                self._loop_until_lost()
            finally:
                self.busy_since = None
            self._connected.clear()
            self._ready.clear()
            if self._stop.is_set():
                break
            self._wait_backoff(self.monitor.next_delay())
        log.debug("mqtt_network_thread_done")

    def _wait_backoff(self, delay: float) -> None:
        """Network thread: wait ``delay`` (or until closed) in slices, counting turns."""
        deadline = time.monotonic() + delay
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._stop.wait(min(remaining, _LOOP_TIMEOUT_S))
            self.turns += 1

    def _loop_until_lost(self) -> None:
        """Network thread: run paho's loop while the connection lasts."""
        rc = MQTTErrorCode.MQTT_ERR_SUCCESS
        while rc == MQTTErrorCode.MQTT_ERR_SUCCESS and not self._abort.is_set():
            self.turns += 1
            try:
                rc = self._paho.loop(_LOOP_TIMEOUT_S)
            except Exception as exc:  # e.g. an SSL error paho does not map: reconnect
                self.monitor.loop_failed(exc, was_connected=self._connected.is_set())
                return
            if self._connected.is_set():
                self.monitor.tick()

    def _handle_connect(self, client: paho.Client, userdata: Any, flags: paho.ConnectFlags,
                        reason: Any, properties: Any) -> None:
        """Network thread: CONNACK received."""
        if reason.is_failure:
            self.monitor.refused(reason)
            return
        self._connects += 1
        self._connected.set()
        self.monitor.connected()
        log.info("mqtt_connected", host=self.settings.host, port=self.settings.port,
                 session_present=flags.session_present, reconnects=self.reconnects,
                 protocol=self.settings.protocol)
        self._subscribe_all()
        if self._on_connected is not None:
            try:
                self._on_connected(flags.session_present)
            except Exception:
                log.exception("mqtt_on_connected_failed")

    def _subscribe_all(self) -> None:
        if not self._subscriptions:
            self._ready.set()
            return
        self._subscribe(self._subscriptions)

    def _subscribe(self, filters: tuple[TopicFilter, ...]) -> None:
        """SUBSCRIBEs of at most 8 filters (:mod:`agent.mqtt.limits`). MQTT 5: retained only for
        a new subscription (a re-subscribe after a reconnect must not replay a retained command);
        Retain-As-Published keeps a live retained command's flag, so it can be refused."""
        options: Any = _SUBSCRIBE_OPTIONS_5 if self.mqtt5 else 1
        for batch in batches(filters):
            rc, mid = self._paho.subscribe([(f.value, options) for f in batch])
            if rc == MQTTErrorCode.MQTT_ERR_SUCCESS and mid is not None:
                self._pending_subs[mid] = batch
            else:
                log.error("mqtt_subscribe_failed", rc=str(rc))

    def _handle_subscribe(self, client: paho.Client, userdata: Any, mid: int,
                          reasons: list[Any], properties: Any) -> None:
        """Network thread: SUBACK received."""
        for topic_filter, reason in zip(self._pending_subs.pop(mid, ()), reasons, strict=False):
            if reason.is_failure:
                log.error("mqtt_subscription_refused", topic=topic_filter.value,
                          reason=str(reason))
        if not self._pending_subs:
            self._ready.set()

    def _handle_disconnect(self, client: paho.Client, userdata: Any, flags: Any,
                           reason: Any, properties: Any) -> None:
        """Network thread: the connection ended (our disconnect, the broker's, or a failure)."""
        was_connected = self._connected.is_set()
        self._connected.clear()
        self._ready.clear()
        self._pending_subs.clear()
        if not self._stop.is_set():
            self.monitor.lost(reason, was_connected=was_connected,
                              from_server=bool(flags.is_disconnect_packet_from_server))

    def _handle_publish(self, client: paho.Client, userdata: Any, mid: int,
                        reason: Any, properties: Any) -> None:
        """Network thread (paho holds its message lock here): a publish was acknowledged."""
        with self._ack_lock:
            waiter = self._ack_waiters.pop(mid, None)
            if waiter is None:
                self._early_acks.add(mid)
        if waiter is not None:
            waiter.set()

    def _handle_message(self, client: paho.Client, userdata: Any,
                        message: paho.MQTTMessage) -> None:
        """Network thread: convert the message and hand it to ``on_message`` (a topic too long
        to route to ``on_refused_topic``, see :mod:`agent.mqtt.refused`). Never raises."""
        if self._on_message is None:
            return
        try:
            topic = Topic(message.topic)
        except (TopicError, UnicodeDecodeError) as exc:
            hand_on_refused(message, exc, self._subscriptions, self.mqtt5, self._on_refused_topic)
            return
        props = message.properties if self.mqtt5 else None
        correlation = getattr(props, "CorrelationData", None)
        inbound = InboundMessage(
            topic=topic, payload=bytes(message.payload), retain=bool(message.retain),
            duplicate=bool(message.dup), response_topic=getattr(props, "ResponseTopic", None),
            correlation_data=bytes(correlation) if correlation is not None else None,
            expiry_s=getattr(props, "MessageExpiryInterval", None), received=time.monotonic())
        try:
            self._on_message(inbound)
        except Exception:
            log.exception("mqtt_message_handler_failed", topic=topic.value)

