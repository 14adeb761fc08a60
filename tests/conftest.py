"""Shared fixtures, registered once here: voices (the tiny generated one, the real one prepared
by build.sh), a real Mosquitto (``mqtt_broker``; or the bridged pair or the RabbitMQ node that
a ``brokers`` marker names: :mod:`tests.support.broker_matrix`), an ALSA configuration of the
test's own (``alsa``) and a stand-in for systemd's notify socket (``notify``).

Test modules use them by naming them as parameters; the plain helpers behind them (``Broker``,
``running_broker``, ``AlsaConfig``, ``NotifySocket``, ...) are imported from ``tests.support``.
The broker and ALSA helpers are imported when a test first asks for them, so collecting the
unit tests does not load the whole agent.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import REPO, broker_matrix, make_tiny_voice
from tests.support.notify_socket import NotifySocket

if TYPE_CHECKING:
    from tests.support.alsa_sink import AlsaConfig
    from tests.support.broker import Broker
    from tests.support.other_brokers import RabbitMq

ROOT = REPO
REAL_MODELS = ROOT / "models"
REAL_VOICE = "en_US-joe-medium"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``slow`` tests first (in their own order), the rest as collected: pytest-xdist's
    ``load`` schedule hands the first tests out first, so the longest ones start at once, in
    parallel with the rest, instead of being the tail that the whole run waits on."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only-by-convention models dir holding the tiny voice; copy it before changing it."""
    models = tmp_path_factory.mktemp("tiny-models")
    make_tiny_voice.build_bundle(models)
    return models


@pytest.fixture()
def tiny_voice_dir(tiny_models_dir: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the tiny voice bundle (tests may modify it)."""
    models = tmp_path / "models"
    shutil.copytree(tiny_models_dir, models)
    yield models / make_tiny_voice.VOICE


@pytest.fixture(scope="session")
def real_models_dir() -> Path:
    """The models dir with the real en_US-joe-medium voice; skips when build.sh has not run."""
    if not (REAL_MODELS / REAL_VOICE / "manifest.json").is_file():
        pytest.skip("real voice not prepared: run ./build.sh")
    return REAL_MODELS


@pytest.fixture(scope="session")
def real_voice_dir(real_models_dir: Path) -> Path:
    return real_models_dir / REAL_VOICE



@pytest.fixture()
def mqtt_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """A plain Mosquitto on a random loopback port, for one test; for a test marked ``brokers``
    the broker of its parameter (``mosquitto``, ``bridged`` or ``rabbitmq``:
    :mod:`tests.support.broker_matrix`)."""
    with broker_matrix.open_broker(getattr(request, "param", "mosquitto"), request,
                                   tmp_path) as broker:
        yield broker


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMq]:
    """One RabbitMQ node for the session (each xdist worker's); skips when it is missing,
    except in CI (``CI=true``), where it fails."""
    yield from broker_matrix.rabbitmq_node(tmp_path_factory)


@pytest.hookimpl(trylast=True)  # after @pytest.mark.parametrize: the broker's id comes last
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    broker_matrix.parametrize(metafunc)


@pytest.fixture()
def alsa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AlsaConfig:
    """An ALSA configuration in ``tmp_path`` that only this test's process reads
    (``ALSA_CONFIG_PATH``); add the PCMs the test plays into."""
    from tests.support.alsa_sink import AlsaConfig

    return AlsaConfig(tmp_path, monkeypatch)


@pytest.fixture()
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    """A notify socket bound at ``tmp_path/notify.sock``; pass ``notify.env()`` to a child."""
    sock = NotifySocket(tmp_path / "notify.sock")
    yield sock
    sock.close()
