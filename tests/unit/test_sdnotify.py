"""The systemd notify protocol against a real AF_UNIX datagram socket bound by the test."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from agent.health.sdnotify import MAX_STATUS_CHARS, Notifier
from tests.support.notify_socket import NotifySocket


def test_ready_with_status_reaches_the_socket_from_this_process(notify: NotifySocket) -> None:
    notifier = Notifier(notify.address)
    assert notifier.enabled
    assert notifier.ready(status="serving en_US-joe-medium")
    message = notify.receive()
    assert message is not None
    assert message.fields == {"READY": "1", "STATUS": "serving en_US-joe-medium"}
    assert message.pid == os.getpid()


def test_abstract_namespace_socket() -> None:
    name = f"tts-agent-test-{uuid.uuid4().hex}"
    sock = NotifySocket(abstract=name)
    try:
        notifier = Notifier.from_environ(sock.env())
        assert notifier.address == "@" + name
        assert notifier.watchdog()
        message = sock.receive()
        assert message is not None and message.fields == {"WATCHDOG": "1"}
    finally:
        sock.close()


def test_every_message_kind(notify: NotifySocket) -> None:
    notifier = Notifier(notify.address)
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert notifier.reloading("reloading config")
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert notifier.status("ok; served 3")
    assert notifier.stopping()
    assert notifier.extend_timeout(2.5)

    reloading = notify.receive()
    assert reloading is not None
    assert reloading.fields["RELOADING"] == "1"
    assert reloading.fields["STATUS"] == "reloading config"
    assert before <= int(reloading.fields["MONOTONIC_USEC"]) <= after
    status = notify.receive()
    assert status is not None and status.fields == {"STATUS": "ok; served 3"}
    stopping = notify.receive()
    assert stopping is not None and stopping.fields == {"STOPPING": "1"}
    extend = notify.receive()
    assert extend is not None and extend.fields == {"EXTEND_TIMEOUT_USEC": "2500000"}


def test_status_is_one_clean_line(notify: NotifySocket) -> None:
    notifier = Notifier(notify.address)
    notifier.status("degraded:\nmqtt disconnected\r\nREADY=1 " + "x" * 500)
    message = notify.receive()
    assert message is not None
    assert list(message.fields) == ["STATUS"]  # the injected READY=1 stayed inside STATUS
    assert "\n" not in message.fields["STATUS"]
    assert message.fields["STATUS"].startswith("degraded: mqtt disconnected  READY=1 x")
    assert len(message.fields["STATUS"]) == MAX_STATUS_CHARS


def test_not_under_systemd_every_call_is_a_no_op() -> None:
    notifier = Notifier.from_environ({})
    assert not notifier.enabled
    assert notifier.watchdog_interval_s() is None
    assert notifier.ready() is False
    assert notifier.watchdog() is False
    assert notifier.stopping() is False


@pytest.mark.parametrize("address", ["vsock:2:1234", "relative/path", "@" + "x" * 200])
def test_unusable_addresses_disable_the_notifier(address: str) -> None:
    notifier = Notifier(address)
    assert not notifier.enabled
    assert notifier.ready() is False


def test_watchdog_interval_from_the_environment(notify: NotifySocket) -> None:
    env = notify.env(WATCHDOG_USEC="30000000", WATCHDOG_PID=str(os.getpid()))
    assert Notifier.from_environ(env).watchdog_interval_s() == 30.0
    env["WATCHDOG_PID"] = str(os.getpid() + 1)  # inherited from a parent: not ours
    assert Notifier.from_environ(env).watchdog_interval_s() is None
    del env["WATCHDOG_PID"]
    assert Notifier.from_environ(env).watchdog_interval_s() == 30.0
    env["WATCHDOG_USEC"] = "garbage"
    assert Notifier.from_environ(env).watchdog_interval_s() is None
    assert Notifier.from_environ({"WATCHDOG_USEC": "30000000"}).watchdog_interval_s() is None


def test_unset_keeps_children_from_notifying(notify: NotifySocket) -> None:
    env = notify.env(WATCHDOG_USEC="1000000", WATCHDOG_PID="1", OTHER="kept")
    notifier = Notifier.from_environ(env, unset=True)
    assert notifier.enabled
    assert env == {"OTHER": "kept"}


def test_a_vanished_socket_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "n"
    sock = NotifySocket(path)
    notifier = Notifier(str(path))
    sock.close()
    path.unlink()
    assert notifier.watchdog() is False
    assert notifier.watchdog() is False
    again = NotifySocket(path)  # systemd came back (e.g. daemon-reexec)
    try:
        assert notifier.watchdog() is True
        message = again.receive()
        assert message is not None and message.fields == {"WATCHDOG": "1"}
    finally:
        again.close()
