"""The controller side of the integration tests: an MQTT client watching one device's events and
status over the test broker (:class:`~tests.support.broker.Recorder`), which a test gets once the
agent says it is online, and what it reads of a request's events."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent.mqtt.topics import DeviceTopics, Namespace, TopicFilter
from tests.support.broker import Broker, Recorder

__all__ = ["DEV", "events_for", "final_for", "kinds_for", "online_controller"]

DEV = Namespace("tts").device("t1")
"""The device :func:`tests.support.broker.agent_settings` makes by default."""


@contextmanager
def online_controller(broker: Broker, device: DeviceTopics = DEV, *,
                      filters: Sequence[TopicFilter] | None = None,
                      name: str = "controller") -> Iterator[Recorder]:
    """A controller watching ``device``'s events and status (or ``filters``); it is yielded once
    the device's status says online."""
    watched = list(filters) if filters is not None else [device.events.as_filter(),
                                                         device.status.as_filter()]
    with Recorder(broker.settings(), watched, name) as recorder:
        recorder.wait_json(device.status, lambda p: p["state"] == "online")
        yield recorder


def events_for(recorder: Recorder, request_id: str,
                    device: DeviceTopics = DEV) -> list[dict[str, Any]]:
    """Every event recorded for ``request_id``, in arrival order."""
    return [e for e in recorder.json_on(device.events) if e.get("id") == request_id]


def kinds_for(recorder: Recorder, request_id: str, device: DeviceTopics = DEV) -> list[str]:
    """The kinds (``accepted``, ``started``, ...) of the events recorded for ``request_id``."""
    return [e["event"] for e in events_for(recorder, request_id, device)]


def final_for(recorder: Recorder, request_id: str, timeout: float = 60,
              device: DeviceTopics = DEV) -> dict[str, Any]:
    """Waits for the final event of ``request_id`` (fails the test after ``timeout``)."""
    return recorder.wait_json(device.events, lambda e: e["id"] == request_id and e["final"],
                              timeout)
