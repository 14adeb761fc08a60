"""Recorders that stand in for a sink in unit tests (wiring only): what the library reported,
what would have been published."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agent.mqtt.client import OutboundMessage, Publication
from agent.mqtt.publisher import model_event_fields
from agent.outcomes import VoiceEvent

__all__ = ["ModelEvents", "Sent"]


class ModelEvents:
    """Collects the library's model events (``on_event``; called on the watcher thread) as
    their wire fields (``event``, ``voice``...: what the publisher sends)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.cond = threading.Condition()

    def __call__(self, event: VoiceEvent) -> None:
        with self.cond:
            self.items.append(model_event_fields(event))
            self.cond.notify_all()

    def kinds(self) -> list[str]:
        return [e["event"] for e in self.items]

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 30.0) -> None:
        """Until ``predicate`` holds for the events so far."""
        with self.cond:
            assert self.cond.wait_for(lambda: predicate(self.items), timeout), self.items

    def wait_for_event(self, predicate: Callable[[dict[str, Any]], bool],
                       timeout: float = 30.0) -> dict[str, Any]:
        """The first event for which ``predicate`` holds, once there is one."""
        with self.cond:
            assert self.cond.wait_for(lambda: any(predicate(e) for e in self.items),
                                      timeout), self.items
            return next(e for e in self.items if predicate(e))


class Sent:
    """Records what would be published (stands in for the MQTT client)."""

    def __init__(self) -> None:
        self.messages: list[OutboundMessage] = []

    def publish(self, message: OutboundMessage) -> Publication:
        self.messages.append(message)
        done = threading.Event()
        done.set()
        return Publication(len(self.messages), done)
