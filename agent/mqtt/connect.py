"""How the MQTT client connects: the paho client built from the settings, and the
reconnect policy.

- MQTT 5 by default, 3.1.1 selectable (``mqtt.protocol``).
- Persistent session: clean start off and a session expiry (MQTT 5), ``clean_session=False``
  (3.1.1), so commands sent while the device was briefly away are delivered when it returns.
  ``persistent=False`` makes a throw-away session instead.
- TLS with CA verification, mutual TLS, user name / password. The password comes from
  ``password`` or ``password_file`` (systemd credentials) and is never logged.
- The Last Will, set once; paho sends it with every connect.
- Every socket write happens on the network thread, and Nagle's algorithm is off.
- Reconnect with exponential backoff and *full jitter* (:class:`Backoff`), so a fleet does not
  stampede a restarted broker.

Nothing here touches the network: :func:`new_paho` only prepares the client
(``connect_async``); :class:`agent.mqtt.client.MqttClient`'s network thread connects.
"""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
from typing import TYPE_CHECKING, Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

if TYPE_CHECKING:
    from agent.mqtt.client import OutboundMessage
    from agent.settings import MqttSettings

__all__ = ["MAX_QUEUED_MESSAGES", "Backoff", "ClientConfigError", "new_paho"]

MAX_QUEUED_MESSAGES = 1000
"""Outgoing QoS 1 messages paho keeps while the broker is unreachable; newer ones are dropped."""


class ClientConfigError(Exception):
    """The MQTT settings cannot be used (unreadable password file, bad certificate...)."""


class Backoff:
    """Exponential backoff with full jitter: attempt ``n`` waits ``U(0, min(cap, base*2**n))``.

    Full jitter spreads a fleet's reconnects evenly over the window instead of letting every
    device retry in lock-step after a broker restart.
    """

    def __init__(self, base_s: float, cap_s: float, rng: random.Random | None = None) -> None:
        if base_s <= 0 or cap_s < base_s:
            raise ValueError("backoff needs 0 < base <= cap")
        self.base_s = base_s
        self.cap_s = cap_s
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography

    @classmethod
    def for_settings(cls, settings: MqttSettings) -> Backoff:
        """``mqtt.reconnect_min_s`` .. ``mqtt.reconnect_max_s`` (a smaller max counts as min)."""
        return cls(settings.reconnect_min_s,
                   max(settings.reconnect_min_s, settings.reconnect_max_s))

    def ceiling(self, attempt: int) -> float:
        """The upper bound of the wait before retry ``attempt`` (0-based)."""
        return min(self.cap_s, self.base_s * 2.0 ** min(attempt, 62))

    def delay(self, attempt: int) -> float:
        """A random wait in ``[0, ceiling(attempt)]``."""
        return self._rng.uniform(0.0, self.ceiling(attempt))


def _tls_context(settings: MqttSettings) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(
            cafile=str(settings.ca_file) if settings.ca_file else None
        )
        if settings.cert_file is not None and settings.key_file is not None:
            context.load_cert_chain(str(settings.cert_file), str(settings.key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ClientConfigError(f"cannot set up TLS: {exc}") from exc
    return context


def _set_credentials(client: paho.Client, settings: MqttSettings) -> None:
    """User name and password, the password read from its file now (never logged)."""
    try:
        password = settings.resolved_password()
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientConfigError(
            f"cannot read the MQTT password file {settings.password_file}: "
            f"{getattr(exc, 'strerror', None) or type(exc).__name__}"
        ) from None
    if settings.username is not None or password is not None:
        client.username_pw_set(
            settings.username, password.get_secret_value() if password else None
        )


def new_paho(settings: MqttSettings, client_id: str, *, persistent: bool,
             will: OutboundMessage | None) -> paho.Client:
    """A paho client set up to connect as the settings say (message callbacks not set yet).

    Raises :class:`ClientConfigError` when the TLS files or the password file cannot be used.
    """
    mqtt5 = settings.protocol == "5"
    client = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=None if mqtt5 else not persistent,
        protocol=MQTTProtocolVersion.MQTTv5 if mqtt5 else MQTTProtocolVersion.MQTTv311,
        reconnect_on_failure=False,
    )
    client.max_queued_messages_set(MAX_QUEUED_MESSAGES)
    if settings.tls:
        client.tls_set_context(_tls_context(settings))
    _set_credentials(client, settings)
    if will is not None:
        client.will_set(will.topic.value, will.payload, will.qos, will.retain)
    connect_props: Properties | None = None
    if mqtt5:
        connect_props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        connect_props.SessionExpiryInterval = settings.session_expiry_s if persistent else 0
    client.connect_async(
        settings.host, settings.port, settings.keepalive_s,
        clean_start=(not persistent) if mqtt5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
        properties=connect_props,
    )
    # Registering a write callback stops paho from writing to the socket on the caller's
    # thread inside publish(); the network thread, woken through paho's socket pair,
    # does every write.
    client.on_socket_register_write = _ignore_socket
    client.on_socket_unregister_write = _ignore_socket
    client.on_socket_open = _no_delay
    return client


def _ignore_socket(client: paho.Client, userdata: Any, sock: Any) -> None:
    """Paho socket-write registration hook; the network thread polls for writability itself."""


def _no_delay(client: paho.Client, userdata: Any, sock: Any) -> None:
    """Network thread, socket just opened: disable Nagle's algorithm.

    MQTT sends small packets back to back (a PUBACK, then an event); with Nagle the second
    waits for the peer's delayed ACK. ``bench/mqtt_latency.py`` measures publish -> accepted,
    the round trip this keeps short.
    """
    with contextlib.suppress(OSError, AttributeError):  # not a TCP socket: nothing to tune
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
