"""Unit tests run in this one process: no subprocess, no broker, no agent (docs/architecture.md).

An autouse fixture refuses, for every test under ``tests/unit/`` and the fixtures it asks for,
starting a process (``subprocess``, asyncio's subprocesses, ``os.fork``, ``posix_spawn``,
``system``, ``exec*``) and a TCP connection to a port no socket of this process listens on (a
broker, an agent, any outside server). The refused call raises :class:`NotInOneProcess`, and the
test fails at teardown even where the code under test catches that error. Allowed: onnxruntime,
espeak-ng and alsa-lib in this process, AF_UNIX sockets, servers the test runs here, and the
standard library's own host probes (``PROBES``). A test that needs a process goes to
``tests/integration/``.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

_REPO = Path(__file__).resolve().parents[2]

MOVE = "unit tests run in one process; a test that needs this belongs in tests/integration/"


class NotInOneProcess(RuntimeError):
    """A unit test started a process or connected outside this process."""


class OneProcess:
    """What the guard refused during one test."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def refuse(self, what: str) -> NotInOneProcess:
        message = f"{what}: {MOVE}"
        self.violations.append(message)
        return NotInOneProcess(message)


PROBES = frozenset({ctypes.util.__file__, platform.__file__})
"""Standard-library look-ups that shell out on their own: ``ctypes.util.find_library`` (``ldconfig
-p``, how espeak-ng's library is found before ctypes loads it here) and ``platform.processor()``
(``uname -p``). They ask the host a question; nothing of the agent runs in the child."""


def _from_a_probe() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename in PROBES:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _refuse_process(guard: OneProcess, name: str,
                    original: Callable[..., Any]) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        if _from_a_probe():
            return original(*args, **kwargs)
        shown = args[1] if name == "subprocess.Popen" and len(args) > 1 else args[:1]
        raise guard.refuse(f"{name}({shown!r}) starts a process")
    return refused


def _listening_here(port: int) -> bool:
    """Whether a socket of this process listens on TCP ``port`` (Linux: ``/proc``)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for fd in os.listdir("/proc/self/fd") if inodes else ():
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") in inodes:
                return True
    return False


def _guard_sockets(guard: OneProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if (sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
                and isinstance(address, tuple) and not _listening_here(address[1])):
            raise guard.refuse(f"a TCP connection to {address[0]}:{address[1]}, which no socket "
                               "of this process listens on (a broker? an agent?)")

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        connect(sock, address)

    def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


@pytest.fixture(autouse=True)
def one_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[OneProcess]:
    """The guard; a test of the guard itself clears ``violations`` of what it provoked."""
    guard = OneProcess()
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse_process(
        guard, "subprocess.Popen", subprocess.Popen._execute_child))  # type: ignore[attr-defined]
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse_process(guard, f"os.{name}", getattr(os, name)))
    _guard_sockets(guard, monkeypatch)
    yield guard
    if guard.violations:
        pytest.fail("\n".join(dict.fromkeys(guard.violations)), pytrace=False)


@pytest.fixture(scope="module")
def accuracy() -> Iterator[ModuleType]:
    """``bench/text_accuracy.py`` as a module (the English and the per-language sets' tests)."""
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(_REPO / "bench"))
    import text_accuracy

    yield text_accuracy
    mp.undo()
