"""The broker matrix: the end-to-end tests that say the agent runs on any standard broker (issue
#18) run on each broker their ``brokers`` marker names, through the ``mqtt_broker`` fixture
(``tests/conftest.py``):

    @pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
    def test_control_commands(agent: AgentService, controller: Recorder) -> None: ...

collects ``test_control_commands[mosquitto]``, ``[bridged]`` and ``[rabbitmq]`` (after the ids of
the test's own parameters). The brokers (:data:`BROKERS`):

- ``mosquitto``: one plain Mosquitto (:func:`tests.support.broker.running_broker`), what every
  other test gets.
- ``bridged``: two Mosquitto brokers bridged to each other, a small model of a clustered
  deployment (:class:`tests.support.other_brokers.BridgedPair`): devices on broker A, the
  controller (the tests' recorders, ``send``, ``fleet``) on broker B, whose configuration
  bridges the agent's topics both ways to A. Its ``settings()`` are B's, what agents get from
  ``agent_settings`` is A's. The bridge carries the agent's topics only, so a Response Topic of
  the controller's own outside them does not cross it (``send --wait`` replies in
  ``tts/reply/...``, which does). Its own tests: ``tests/integration/test_bridged_brokers.py``.
- ``rabbitmq``: RabbitMQ's MQTT plugin (Debian's ``rabbitmq-server``, 3.10: MQTT 3.1.1 only;
  :class:`tests.support.other_brokers.RabbitMq`, whose settings say ``protocol = "3.1.1"``), one
  node for the session (it takes many seconds to boot), with the retained topics a previous
  test left cleared (the status and health of the default device ``t1``, Hermes'
  ``sayFinished``). Skipped when the package is missing, except in CI, where that fails
  (:func:`tests.support.other_brokers.rabbitmq_missing`). A test that needs MQTT 5 (Response
  Topic) or a retained message on a wildcard subscription (RabbitMQ 3.10 delivers retained
  messages only on exact topics) does not name it; docs/fleet.md, "Brokers", says what
  differs. Its own tests: ``tests/integration/test_rabbitmq.py``.

The other modules are imported when a broker is first started, so collecting the unit tests
does not load the agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.support.broker import Broker
    from tests.support.other_brokers import RabbitMq

BROKERS = ("mosquitto", "bridged", "rabbitmq")
"""The brokers a ``brokers`` marker may name (registered in pyproject.toml); a test without the
marker gets ``mosquitto``."""

def parametrize(metafunc: pytest.Metafunc) -> None:
    """``pytest_generate_tests``: a test marked ``brokers`` gets ``mqtt_broker`` parametrized
    (indirectly) with the brokers its marker names."""
    marker = metafunc.definition.get_closest_marker("brokers")
    if marker is None:
        return
    names = tuple(marker.args)
    unknown = [name for name in names if name not in BROKERS]
    if not names or unknown or len(set(names)) != len(names):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: brokers{names!r}: name each of "
                                f"{', '.join(BROKERS)} at most once")
    if "mqtt_broker" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: marked brokers but uses no "
                                "mqtt_broker")
    metafunc.parametrize("mqtt_broker", names, indirect=True, ids=names)


def rabbitmq_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMq]:
    """The session's RabbitMQ node (the ``rabbitmq`` fixture); skips when it is missing."""
    from tests.support.other_brokers import rabbitmq_missing, running_rabbitmq

    reason = rabbitmq_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_rabbitmq(tmp_path_factory.mktemp("rabbitmq")) as node:
        yield node


@contextmanager
def open_broker(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """The broker ``kind`` names (:data:`BROKERS`), for one test."""
    if kind == "mosquitto":
        from tests.support.broker import running_broker

        with running_broker(tmp_path / "broker") as broker:
            yield broker
    elif kind == "bridged":
        from tests.support.other_brokers import running_bridged_pair

        with running_bridged_pair(tmp_path / "brokers") as pair:
            yield pair
    elif kind == "rabbitmq":
        from agent.mqtt.topics import HERMES_SAY_FINISHED, Namespace
        from tests.support.broker import Recorder

        node: RabbitMq = request.getfixturevalue("rabbitmq")
        device = Namespace("tts").device("t1")  # agent_settings' default device
        with Recorder(node.settings(), [], "cleaner") as cleaner:
            for topic in (device.status, device.health, HERMES_SAY_FINISHED):
                cleaner.publish(topic, b"", retain=True)
        yield node
    else:
        raise ValueError(f"unknown broker {kind!r}: one of {', '.join(BROKERS)}")


def broker_fixture(kind: str) -> Any:
    """An ``mqtt_broker`` fixture for a module whose every test runs on ``kind`` only (its own
    tests, which the other brokers do not run)."""
    @pytest.fixture()
    def mqtt_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
        with open_broker(kind, request, tmp_path) as broker:
            yield broker
    return mqtt_broker
