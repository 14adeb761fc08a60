"""Where the agent runs, and the default paths that follow from it.

Every path setting is made absolute once, when the settings are read. ``models.dir`` and
``cache.dir`` default to the checkout's ``models/`` and ``.cache/tts-agent/`` when the agent runs
from a source tree, else to the system's places (``/var/lib/tts-agent/models``,
``$CACHE_DIRECTORY`` ...). The rules: docs/internals.md#default-paths (and
docs/operations.md#checking-a-configuration). A device's own state is in
``<cache.dir>/devices/<device_id>/`` (:func:`device_state_dir`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

__all__ = [
    "INSTALLED_CACHE_DIR",
    "INSTALLED_MODELS_DIR",
    "JOURNAL_NAME",
    "AbsPath",
    "PromPath",
    "SecretPath",
    "absolute",
    "checkout_root",
    "default_cache_dir",
    "default_model_dir",
    "device_state_dir",
    "path_rule",
]

JOURNAL_NAME = "requests.journal"
"""The request journal's file name in ``<cache.dir>/devices/<device_id>/`` when
``mqtt.journal.file`` is unset (an older agent's, in ``cache.dir`` itself, is moved there:
:mod:`agent.daemon.state`). Here, not in :mod:`agent.mqtt.journal`, so that claiming the
device's state before the default voice starts loading imports neither the journal nor the
MQTT protocol."""

PROJECT_NAME = "edge-tts-agent"
INSTALLED_MODELS_DIR = Path("/var/lib/tts-agent/models")
INSTALLED_CACHE_DIR = Path("/var/cache/tts-agent")


@functools.cache
def checkout_root() -> Path | None:
    """The source tree the running ``agent`` package was imported from; None when installed."""
    import agent

    root = Path(agent.__file__).resolve().parent.parent
    try:
        with (root / "pyproject.toml").open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    return root if f'name = "{PROJECT_NAME}"'.encode() in head else None


def absolute(path: Path) -> Path:
    """``path`` made absolute against the current directory (``~`` expanded); no link is
    followed and nothing is read."""
    return Path(os.path.abspath(path.expanduser()))


def credential_path(path: Path) -> Path:
    """A relative ``mqtt.password_file`` lives in ``$CREDENTIALS_DIRECTORY`` when systemd sets it
    (``LoadCredential=``), else in the current directory."""
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if creds and not path.expanduser().is_absolute():
        return absolute(Path(creds) / path)
    return absolute(path)


def textfile_path(path: Path) -> Path:
    """``health.prometheus_file``: node_exporter's textfile collector reads ``*.prom`` only."""
    if path.suffix != ".prom":
        raise ValueError("node_exporter's textfile collector only reads files ending in .prom")
    return absolute(path)


AbsPath = Annotated[Path, AfterValidator(absolute)]
"""A path setting, absolute once read."""
SecretPath = Annotated[Path, AfterValidator(credential_path)]
"""A secret's file, absolute once read (relative names are in ``$CREDENTIALS_DIRECTORY``)."""
PromPath = Annotated[Path, AfterValidator(textfile_path)]
"""A Prometheus textfile, absolute once read."""


def default_model_dir() -> Path:
    """``models.dir`` when unset: the checkout's ``models/``, else the installed one."""
    root = checkout_root()
    return root / "models" if root is not None else INSTALLED_MODELS_DIR


def default_cache_dir() -> Path:
    """``cache.dir`` when unset: see the module's docstring."""
    root = checkout_root()
    if root is not None:
        return root / ".cache" / "tts-agent"
    systemd = os.environ.get("CACHE_DIRECTORY", "").split(":")[0]
    if systemd:
        return absolute(Path(systemd))
    if os.geteuid() == 0:
        return INSTALLED_CACHE_DIR
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return absolute(base / "tts-agent")


DEVICES_SUBDIR = "devices"
"""Below ``cache.dir``: one directory per device id, its own state (the request journal)."""


def device_state_dir(cache_dir: Path, device_id: str) -> Path:
    """Where the state of device ``device_id`` lives: ``<cache.dir>/devices/<device_id>``, so
    that agents side by side on one ``cache.dir`` (one checkout) never share it. The device
    id's pattern (``NAME_PATTERN``: no ``/``, never ``.`` or ``..``) makes it one level."""
    return cache_dir / DEVICES_SUBDIR / device_id


def path_rule() -> str:
    """Which rule chose the defaults here, in words (for ``check-config --explain``)."""
    root = checkout_root()
    if root is not None:
        return f"the agent runs from the checkout {root}"
    if os.environ.get("CACHE_DIRECTORY"):
        return "the agent is installed and runs under systemd (CacheDirectory=)"
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    return f"the agent is installed (not a checkout) and runs as {who}"
