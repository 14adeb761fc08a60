"""The guard of tests/unit/conftest.py: a unit test that starts a process or connects to a server
outside this process fails, with the reason; in-process work stays allowed."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes.util
import os
import socket
import subprocess
import sys

import pytest

from tests.unit.conftest import NotInOneProcess, OneProcess


def test_a_subprocess_is_refused_with_the_reason(one_process: OneProcess) -> None:
    with pytest.raises(NotInOneProcess, match="tests/integration/"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    assert "starts a process" in one_process.violations[0]
    one_process.violations.clear()


def test_asyncio_and_os_level_processes_are_refused(one_process: OneProcess) -> None:
    async def spawn() -> None:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    with pytest.raises(NotInOneProcess):
        asyncio.run(spawn())
    with pytest.raises(NotInOneProcess):
        os.system("true")  # noqa: S605, S607
    with pytest.raises(NotInOneProcess):
        os.fork()
    assert len(one_process.violations) == 3
    one_process.violations.clear()


def test_a_refusal_the_code_swallows_still_fails_the_test(one_process: OneProcess) -> None:
    with contextlib.suppress(Exception):  # as code under test might
        subprocess.run(["true"], check=False)  # noqa: S607
    assert one_process.violations  # the fixture's teardown fails the test on these
    one_process.violations.clear()


def test_a_connection_outside_this_process_is_refused(one_process: OneProcess) -> None:
    with socket.socket() as probe:  # a port nobody listens on, as a broker's would be
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with socket.socket() as client, pytest.raises(NotInOneProcess, match="a broker"):
        client.connect(("127.0.0.1", port))
    one_process.violations.clear()


def test_a_server_in_this_process_and_unix_sockets_are_allowed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()[:2], timeout=5) as client:
        peer, _ = server.accept()
        with peer:
            client.sendall(b"hi")
            assert peer.recv(2) == b"hi"
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        left.sendall(b"ok")
        assert right.recv(2) == b"ok"


def test_the_standard_librarys_own_probes_are_allowed() -> None:
    """espeak-ng is found with ctypes.util (``ldconfig -p``) and loaded in this process."""
    assert ctypes.util.find_library("espeak-ng")
