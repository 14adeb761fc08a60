"""How the MQTT client connects: the paho client built from the settings, and a hint for every way
a connect can fail.

:func:`new_paho` prepares the client (protocol, persistent session, TLS, credentials, the Last
Will) without touching the network; the client's network thread connects, and when to retry is
:mod:`agent.mqtt.reconnect`'s job. :func:`failure_hint`, :func:`closed_hint` and
:func:`refusal_hint` name the setting to check. What is set and why: docs/internals.md#connecting.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
from typing import TYPE_CHECKING, Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from agent.mqtt.credentials import ClientConfigError, read_password, tls_context

if TYPE_CHECKING:
    from agent.mqtt.client import OutboundMessage
    from agent.settings import MqttSettings

__all__ = ["MAX_QUEUED_MESSAGES", "ClientConfigError", "closed_hint", "failure_hint", "new_paho",
           "refusal_hint"]

MAX_QUEUED_MESSAGES = 1000
"""Outgoing QoS 1 messages paho keeps while the broker is unreachable; newer ones are dropped."""
FINALS_PER_REQUEST = 3
"""Messages one journalled request's final can take: its event, and a Response Topic reply or
Hermes' ``sayFinished`` and ``error/tts``."""


def queue_limit(settings: MqttSettings) -> int:
    """Outgoing QoS 1 messages paho may hold while disconnected: the usual bound, plus room for
    the finals a restart publishes for a full request journal before the first connection
    (:func:`agent.mqtt.recovery.answer_journalled`), so none of them is dropped."""
    journal = settings.journal
    return MAX_QUEUED_MESSAGES + (FINALS_PER_REQUEST * journal.max_entries
                                  if journal.enabled else 0)


def _set_credentials(client: paho.Client, settings: MqttSettings) -> None:
    """User name and password, the password read from its file now (never logged;
    :func:`agent.mqtt.credentials.read_password`)."""
    password = read_password(settings)
    if settings.username is not None or password is not None:
        client.username_pw_set(settings.username, password)


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
    client.max_queued_messages_set(queue_limit(settings))
    client.connect_timeout = settings.connect_timeout_s  # TCP connect and TLS handshake
    if settings.tls:
        client.tls_set_context(tls_context(settings))
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


_REFUSAL_HINTS = {
    0x84: "the broker does not speak this MQTT version: try mqtt.protocol = \"3.1.1\"",
    0x85: "the broker rejects the client id: set mqtt.client_id",
    0x86: "check mqtt.username and mqtt.password (or mqtt.password_file)",
    0x87: "the broker does not allow this client: check mqtt.username and the broker's ACL",
    0x88: "the broker is not ready yet; the agent keeps retrying",
    0x89: "the broker is busy; the agent keeps retrying",
    0x8A: "the broker banned this client: see the broker's log",
}


def failure_hint(exc: BaseException, settings: MqttSettings) -> str:
    """What to check when the TCP or TLS connect to the broker raised ``exc``."""
    where = f"{settings.host}:{settings.port}"
    text = str(exc).lower()
    reset = isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError))
    cases = (
        (isinstance(exc, ssl.SSLCertVerificationError),
         f"the broker's certificate is not trusted or not made for {settings.host}: "
         "check mqtt.ca_file and mqtt.host"),
        ("certificate required" in text or "certificate_required" in text,
         "the broker requires a client certificate: set mqtt.cert_file and mqtt.key_file"),
        (isinstance(exc, ssl.SSLError) or (settings.tls and reset),
         f"the TLS handshake with {where} failed: is it a TLS listener? "
         "(a plain MQTT port needs mqtt.tls = false)"),
        (isinstance(exc, ConnectionRefusedError),
         f"connection refused: is the broker running on {where}? check mqtt.host and mqtt.port"),
        (isinstance(exc, socket.gaierror),
         f"cannot resolve {settings.host!r}: check mqtt.host and the DNS set-up"),
        (isinstance(exc, TimeoutError),
         f"no answer from {where}: check mqtt.host, mqtt.port and firewalls"),
        (reset, f"{where} reset the connection: is it an MQTT port? "
                "(a TLS listener needs mqtt.tls = true)"),
        (isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH),
         f"no route to {settings.host}: check the network"),
    )
    return next((hint for matches, hint in cases if matches),
                f"check that an MQTT broker listens on {where} (mqtt.host, mqtt.port, mqtt.tls)")


def closed_hint(settings: MqttSettings) -> str:
    """What to check when the broker closed the connection before answering CONNECT."""
    where = f"{settings.host}:{settings.port}"
    # A broker without MQTT 5 (RabbitMQ 3.10's plugin) closes the connection at its CONNECT.
    v5 = ("a broker without MQTT 5 does this: try mqtt.protocol = \"3.1.1\"; "
          if settings.protocol == "5" else "")
    if not settings.tls:
        return (f"{where} closed the connection before answering CONNECT: {v5}is this a TLS "
                "port? set mqtt.tls = true (and mqtt.ca_file); else check that it is an MQTT port")
    return (f"{where} closed the connection before answering CONNECT: {v5}check mqtt.port, "
            "mqtt.protocol and, if the broker asks for one, the client certificate "
            "(mqtt.cert_file, mqtt.key_file)")


def refusal_hint(reason: Any, settings: MqttSettings) -> str:
    """What to check when the broker answered CONNECT with a failure ``reason`` code."""
    return _REFUSAL_HINTS.get(getattr(reason, "value", None) or 0,
                              f"the broker at {settings.host}:{settings.port} refused the "
                              "connection: its log says why")
