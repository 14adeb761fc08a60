"""The controller side of the integration tests: an MQTT client watching one device's events and
status over the test broker (:class:`~tests.support.broker.Recorder`), which a test gets once the
agent says it is online, and what it reads of a request's events. A test module that wants the
usual pair of fixtures writes ``agent = agent_fixture()`` and ``controller = controller_fixture()``
(with the module's settings or filters, see :func:`agent_fixture`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import DeviceTopics, Namespace, TopicFilter
from agent.settings import Settings
from tests.support.broker import Broker, Recorder, agent_settings, running_agent

__all__ = ["DEV", "agent_fixture", "controller_fixture", "events_for", "final_for", "kinds_for",
           "online_controller"]

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


def agent_fixture(prepare: Callable[[Path], None] | None = None, *, settings: str | None = None,
                  **overrides: Any) -> Any:
    """An ``agent`` fixture: the agent with the tiny voice on the test broker, speaking into an
    ALSA file PCM (:func:`tests.support.broker.agent_settings`, given ``overrides``: ``mqtt``,
    ``audio``, ``variant``, ...); ``prepare`` is given the models directory first (to install
    another voice). ``settings`` names a fixture of the module that gives the agent's
    :class:`~agent.settings.Settings` instead (one that needs other fixtures: chimes, a
    speaker)."""
    @pytest.fixture()
    def agent(request: pytest.FixtureRequest, mqtt_broker: Broker, tiny_voice_dir: Path,
              tmp_path: Path) -> Iterator[AgentService]:
        if prepare is not None:
            prepare(tiny_voice_dir.parent)
        chosen: Settings = (
            request.getfixturevalue(settings) if settings is not None
            else agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                                **overrides))
        with running_agent(chosen) as service:
            yield service
    return agent


def controller_fixture(filters: Sequence[TopicFilter] | None = None) -> Any:
    """A ``controller`` fixture for the module's ``agent`` fixture: :func:`online_controller`
    (watching ``filters`` when given)."""
    @pytest.fixture()
    def controller(mqtt_broker: Broker, agent: AgentService) -> Iterator[Recorder]:
        """A controller watching the device's events; returns once the agent is online."""
        with online_controller(mqtt_broker, filters=filters) as recorder:
            yield recorder
    return controller
