"""The systemd notify protocol from a real child process: READY, watchdog pings and STOPPING on
SIGTERM all come from the main PID (the in-process tests are tests/unit/test_sdnotify.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from tests.support import REPO
from tests.support.notify_socket import NotifySocket

_CHILD = textwrap.dedent("""
    import signal, sys, threading
    from agent.health.liveness import Liveness, Watchdog
    from agent.health.sdnotify import Notifier

    notifier = Notifier.from_environ(unset=True)
    liveness = Liveness(stall_s=30)
    turns = [0]
    liveness.watch("synthesis", busy_since=lambda: None, progress=lambda: turns[0])
    watchdog = Watchdog(liveness, notifier)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    watchdog.start()
    notifier.ready(status="ready")
    while not stop.wait(0.05):
        turns[0] += 1
    notifier.stopping(status="stopping")
    watchdog.stop()
    sys.exit(0)
""")


def test_a_real_process_sends_ready_watchdog_and_stopping_on_sigterm(
    notify: NotifySocket,
) -> None:
    env = {**os.environ, **notify.env(WATCHDOG_USEC="200000")}
    child = subprocess.Popen([sys.executable, "-c", _CHILD], env=env,
                             cwd=REPO)
    try:
        before_ready = notify.receive_until("READY")
        assert before_ready[-1].fields["STATUS"] == "ready"
        pings = [m for m in notify.receive_until("WATCHDOG") + notify.receive_until("WATCHDOG")
                 if "WATCHDOG" in m]
        assert len(pings) == 2
        child.send_signal(signal.SIGTERM)
        tail = notify.receive_until("STOPPING")
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    everything = [*before_ready, *pings, *tail]
    # systemd (NotifyAccess=main) only accepts messages from the main PID, threads included.
    assert {m.pid for m in everything} == {child.pid}
    assert tail[-1].fields == {"STOPPING": "1", "STATUS": "stopping"}
