"""Messages on a topic the agent refuses that still matched one of its subscriptions.

:class:`~agent.mqtt.topics.Topic` refuses a topic longer than
:data:`~agent.mqtt.topics.MAX_TOPIC_BYTES`, so a message on one cannot be routed like the
others. But ``tts/<device>/cmd/+`` matches a command name of any length, and the sender of
such a message waits for an answer like any other: when the topic matched one of the client's
subscriptions, the client hands it on as a :class:`RefusedTopicMessage` (the intake answers it
with ``rejected``, see :meth:`agent.mqtt.intake.Intake.on_refused_topic`). The topic's length
is bounded by MQTT itself (a two-byte length); nothing here does more than one pass over it.

Runs on the MQTT network thread, like every paho callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import paho.mqtt.client as paho
from paho.mqtt.client import topic_matches_sub

from agent.logs import get_logger
from agent.mqtt.topics import MAX_TOPIC_BYTES, TopicFilter

__all__ = ["RefusedTopicMessage", "hand_on_refused"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class RefusedTopicMessage:
    """A message whose topic :class:`~agent.mqtt.topics.Topic` refused."""

    topic: str
    """The topic as received (longer than the agent's limit; bounded by MQTT's own)."""
    error: str
    """Why the topic was refused."""
    subscription: TopicFilter
    """The subscription it matched."""
    payload: bytes
    retain: bool
    response_topic: str | None
    correlation_data: bytes | None
    received: float
    """``time.monotonic()`` at receipt."""


def _refused(message: paho.MQTTMessage, error: Exception,
             subscriptions: Sequence[TopicFilter], mqtt5: bool) -> RefusedTopicMessage | None:
    try:
        topic = message.topic
    except UnicodeDecodeError:  # a broker refuses such a topic from its publisher
        return None
    subscription = next((f for f in subscriptions if topic_matches_sub(f.value, topic)), None)
    if subscription is None:
        return None
    props = message.properties if mqtt5 else None
    correlation = getattr(props, "CorrelationData", None)
    return RefusedTopicMessage(
        topic=topic, error=str(error), subscription=subscription,
        payload=bytes(message.payload), retain=bool(message.retain),
        response_topic=getattr(props, "ResponseTopic", None),
        correlation_data=bytes(correlation) if correlation is not None else None,
        received=time.monotonic(),
    )


def hand_on_refused(message: paho.MQTTMessage, error: Exception,
                    subscriptions: Sequence[TopicFilter], mqtt5: bool,
                    handler: Callable[[RefusedTopicMessage], None] | None) -> None:
    """Network thread: log the refused topic and, when it matched one of ``subscriptions``,
    hand it to ``handler``. Never raises."""
    refused: RefusedTopicMessage | None = None
    try:
        refused = _refused(message, error, subscriptions, mqtt5) if handler else None
        log.warning("mqtt_bad_topic", error=str(error), answered=refused is not None,
                    subscription=refused.subscription.value if refused else None)
        if refused is not None and handler is not None:
            handler(refused)
    except Exception:
        log.exception("mqtt_message_handler_failed",
                      topic=refused.topic[:MAX_TOPIC_BYTES] if refused else None)
