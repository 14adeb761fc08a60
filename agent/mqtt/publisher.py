"""Publishing the agent's side of the protocol: events, replies, presence, retained snapshots.

One :class:`EventPublisher` per process. Model lifecycle events use it too:
``publisher.event(MyEvent(...))`` for anything derived from
:class:`agent.mqtt.protocol.EventBase`, ``publisher.model_event(event)`` for the library's
:class:`agent.outcomes.VoiceEvent`, ``publisher.retained(topic, model)`` for retained
state, ``publisher.health(report)`` for the health report. Every method may be called from
any thread and never blocks on the network (messages are queued while the broker is
unreachable). Without MQTT, :class:`OfflinePublisher` stands in for the client.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from agent.logs import get_logger
from agent.mqtt.client import OutboundMessage, Publication
from agent.mqtt.limits import fit_report
from agent.mqtt.protocol import EventBase, ModelEvent, Presence, new_request_id, to_payload
from agent.mqtt.topics import DeviceTopics, Topic
from agent.outcomes import VoiceEvent, VoiceEventKind

__all__ = ["EventPublisher", "OfflinePublisher", "Publisher", "ReplyRoute", "model_event_fields"]

log = get_logger(__name__)


def model_event_fields(event: VoiceEvent) -> dict[str, Any]:
    """``event`` as the wire's fields (``event`` and those of its kind; the same keys as
    before model events were typed): what :meth:`EventPublisher.model_event` sends."""
    fields: dict[str, Any] = {"event": event.kind.value, "voice": event.voice,
                              "version": event.version}
    if event.kind is VoiceEventKind.LOADED:
        fields |= {"variant": event.variant, "sha256": dict(event.sha256 or {}),
                   "load_s": event.load_s, "provider": event.provider,
                   "previous_version": event.previous_version, "signed_by": event.signed_by}
        if event.variant_reason is not None:
            fields["variant_reason"] = event.variant_reason
    elif event.kind is VoiceEventKind.REJECTED:
        fields["reason"] = event.reason
    else:
        fields |= {"variant": event.variant, "files": list(event.files), "reason": event.reason}
    return fields


class Publisher(Protocol):
    """What the publisher needs from a client (:class:`agent.mqtt.client.MqttClient`)."""

    def publish(self, message: OutboundMessage) -> Publication: ...


class OfflinePublisher:
    """The publisher's client when MQTT is disabled: messages only go to the debug log."""

    def publish(self, message: OutboundMessage) -> Publication:
        log.debug("event_not_published", topic=message.topic.value)
        acked = threading.Event()
        acked.set()
        return Publication(None, acked)


@dataclass(frozen=True, slots=True)
class ReplyRoute:
    """Where a command's final event also goes: its MQTT 5 Response Topic and Correlation Data."""

    topic: Topic
    correlation_data: bytes | None = None


class EventPublisher:
    """Publishes events on ``{prefix}/{device}/events``, replies, presence and snapshots."""

    def __init__(self, client: Publisher, topics: DeviceTopics, *,
                 instance: str | None = None) -> None:
        self.client = client
        self.topics = topics
        self.instance = instance
        """This process's instance id, put in every event (``instance``)."""

    @property
    def device_id(self) -> str:
        return self.topics.device_id

    def event(self, event: EventBase, reply: ReplyRoute | None = None) -> None:
        """Publish ``event`` (QoS 1, not retained); a final event also goes to ``reply``."""
        if self.instance is not None and event.instance is None:
            event = event.model_copy(update={"instance": self.instance})
        payload = to_payload(event)
        self.client.publish(OutboundMessage(self.topics.events, payload))
        if reply is not None and event.final:
            self.client.publish(OutboundMessage(reply.topic, payload,
                                                correlation_data=reply.correlation_data))
        log.debug("event_published", id=event.id, event_name=event.event)

    def model_event(self, event: VoiceEvent) -> None:
        """Publish a model event of the voice library (an unsolicited event with an id of its
        own) as :class:`agent.mqtt.protocol.ModelEvent`."""
        self.event(ModelEvent(id=new_request_id(), device=self.device_id,
                              **model_event_fields(event)))

    def presence(self, presence: Presence) -> Publication:
        """Retained presence on ``{prefix}/{device}/status``."""
        return self.retained(self.topics.status, presence)

    def presence_message(self, presence: Presence) -> OutboundMessage:
        """The retained presence message itself (for a Last Will or a final message)."""
        return OutboundMessage(self.topics.status, to_payload(presence), retain=True)

    def retained(self, topic: Topic, snapshot: BaseModel) -> Publication:
        """Publish ``snapshot`` retained (QoS 1) on ``topic``, e.g. the health snapshot."""
        return self.client.publish(OutboundMessage(topic, to_payload(snapshot), retain=True))

    def health(self, report: Mapping[str, Any]) -> Publication:
        """The health report (:class:`agent.health.report.HealthReport`), retained (QoS 1) on
        ``{prefix}/{device}/health`` as compact JSON, its largest sections omitted when it
        would not fit a broker's message size limit (:func:`agent.mqtt.limits.fit_report`)."""
        payload = fit_report(report)
        return self.client.publish(OutboundMessage(self.topics.health, payload, retain=True))

    def raw(self, message: OutboundMessage) -> Publication:
        """Publish a message in a foreign format (Hermes)."""
        return self.client.publish(message)
