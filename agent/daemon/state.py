"""One agent per device state: a lock on ``<cache.dir>/devices/<device_id>/`` (and on an explicit
``mqtt.journal.file``), and an older agent's journal moved in.

Agents side by side on one ``cache.dir`` (one checkout, several device ids) keep their request
journals apart, one directory per device id. A second agent with the same device id and
``cache.dir``, or two agents given one ``mqtt.journal.file``, would share one: the second refuses
to start, naming the device and process that hold it (``fcntl.flock``, released when the holder
ends, however it ends). Where the file cannot be locked (a read-only or lockless file system) the
agent starts without the lock, logged. Design: docs/fleet.md#a-local-test-fleet.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.logs import get_logger
from agent.settings.paths import JOURNAL_NAME, device_state_dir

if TYPE_CHECKING:
    from agent.settings import Settings

__all__ = ["LOCK_NAME", "DeviceState", "StateInUse", "claim_state"]

log = get_logger(__name__)

LOCK_NAME = "run.lock"
"""The lock file in the device's state directory (it names its holder: device id, pid)."""
_MAX_HOLDER_BYTES = 512


class StateInUse(Exception):
    """Another running agent holds this state; the message is the one-line reason."""


@dataclass
class DeviceState:
    """The claimed state of this device: its directory, the locks held until :meth:`release`."""

    dir: Path
    fds: list[int] = field(default_factory=list)

    def release(self) -> None:
        """Let another agent have it (the clean stop; a dead process releases it too)."""
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()

    def __del__(self) -> None:  # a service built and never stopped (tests) lets it go too
        self.release()


def claim_state(settings: Settings) -> DeviceState:
    """Lock this device's state (see the module docstring); raises :class:`StateInUse`."""
    device, journal = settings.device_id, settings.mqtt.journal
    state = DeviceState(device_state_dir(settings.cache.dir, device))
    locks = [(state.dir / LOCK_NAME, f"the state of device {device} ({state.dir})",
              "each agent on one cache.dir needs its own device_id")]
    if journal.enabled and journal.file is not None:
        locks.append((journal.file.with_name(journal.file.name + ".lock"),
                      f"the request journal {journal.file}",
                      "give each agent its own mqtt.journal.file"))
    try:
        for path, what, fix in locks:
            fd = _lock(path, device, what, fix)
            if fd is not None:
                state.fds.append(fd)
    except StateInUse:
        state.release()
        raise
    if journal.enabled and journal.file is None:
        _adopt_legacy(settings.cache.dir / JOURNAL_NAME, state.dir / JOURNAL_NAME)
    return state


def _lock(path: Path, device: str, what: str, fix: str) -> int | None:
    """The locked file's descriptor; None (logged) when it cannot be locked at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        log.warning("state_lock_unavailable", path=str(path), error=str(exc))
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StateInUse(f"{what} is in use by another agent ({holder}): {fix}") from None
        log.warning("state_lock_unavailable", path=str(path), error=str(exc))
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"device": device, "pid": os.getpid()}).encode() + b"\n", 0)
    return fd


def _holder(fd: int) -> str:
    """Who the lock file names (its holder wrote it), in words."""
    try:
        data = json.loads(os.pread(fd, _MAX_HOLDER_BYTES, 0) or b"null")
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        return "its process unknown"
    device, pid = str(data.get("device", "?"))[:64], data.get("pid")
    return f"device {device!r}, pid {pid if isinstance(pid, int) else '?'}"


def _adopt_legacy(legacy: Path, path: Path) -> None:
    """An older agent's journal (``<cache.dir>/requests.journal``) becomes this device's when it
    has none yet, so that what it left unfinished is answered, not lost. Of agents that shared
    it, the first to start takes it (a rename: never two)."""
    if os.path.lexists(path):
        return
    try:
        os.rename(legacy, path)
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("request_journal_not_moved", moved_from=str(legacy), error=str(exc))
        return
    log.warning("request_journal_moved", moved_from=str(legacy), path=str(path))
