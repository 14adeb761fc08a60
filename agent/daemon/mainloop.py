"""The main thread's loop: run a service until SIGTERM or SIGINT, reload it on SIGHUP.

The signal handlers only record the signal; the work (start, READY, reload, stop) happens on
the main thread, one signal at a time, in the order they came. The main thread waits in
``poll()`` on a :func:`signal.set_wakeup_fd` socket pair, so a signal the kernel hands to
another thread is not lost, and a SIGHUP reload runs on a helper thread, so a stop is never held
by a long voice check. Why: docs/internals.md#the-main-loop-and-signals.
"""

from __future__ import annotations

import contextlib
import select
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.settings import Settings

__all__ = ["POLL_S", "Service", "run_until_signal"]

log = get_logger(__name__)

POLL_S = 0.5
"""Longest the main thread waits without looking at the signals received (s)."""
RELOAD_POLL_S = 0.05
"""How often the main thread looks whether a reload ended (s)."""
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Service(Protocol):
    """What the loop drives (:class:`agent.daemon.service.AgentService`)."""

    def start(self, cancelled: Callable[[], bool] = ...) -> None: ...

    def notify_ready(self) -> None: ...

    def reload(self, load_settings: Callable[[], Settings] | None = None) -> str: ...

    def stop(self) -> bool: ...


@contextlib.contextmanager
def _wakeup_socket() -> Iterator[socket.socket]:
    """The reading end of a socket pair that the C signal handler writes to (any thread);
    the previous wake-up fd is put back afterwards."""
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield reader
    finally:
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()


def _wait(reader: socket.socket, timeout: float) -> None:
    """Block until a signal came (on any thread) or ``timeout`` passed; drain the socket.

    Returning to Python code is what lets the interpreter run the handlers. ``poll``, not
    ``select``: the socket's descriptor may be above ``FD_SETSIZE`` in a busy process."""
    poller = select.poll()
    poller.register(reader, select.POLLIN)
    if poller.poll(timeout * 1000):
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while reader.recv(256):
                pass


def _reload(service: Service, load_settings: Callable[[], Settings] | None,
            reader: socket.socket, stop_received: Callable[[], bool]) -> None:
    """``service.reload`` on a helper thread; returns when it ended or a stop came (the stop
    then proceeds while the reload thread finishes or is left behind). An exception of the
    reload is raised here, on the main thread, as it was when the main thread reloaded."""
    done = threading.Event()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            service.reload(load_settings)
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name="reload", daemon=True).start()
    while not done.is_set() and not stop_received():
        _wait(reader, RELOAD_POLL_S)
    if failure:
        raise failure[0]


def run_until_signal(service: Service,
                     load_settings: Callable[[], Settings] | None = None) -> int:
    """Run ``service`` until SIGTERM or SIGINT; exit status 0. Main thread only.

    SIGHUPs that come during a reload are served by one more reload after it.

    Start, then ``READY=1`` (the default voice is warm) unless a stop signal came during
    the start (the start asks ``cancelled`` while it waits for the default voice, and ends
    early when a stop came). SIGHUP reloads (``service.reload``, re-reading the settings through
    ``load_settings``); SIGTERM/SIGINT stop it gracefully. Each takes effect at once even
    when the kernel delivered it to a worker thread (see the module docstring). The previous
    handlers and wake-up fd are put back afterwards.
    """
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)

    def stop_received() -> bool:
        return any(sig != signal.SIGHUP for sig in received)

    with _wakeup_socket() as reader:
        previous = {sig: signal.signal(sig, on_signal) for sig in _SIGNALS}
        try:
            service.start(stop_received)
            if not stop_received():
                service.notify_ready()
            while True:
                if not received:
                    _wait(reader, POLL_S)
                pending = []
                while received:  # the handler may append meanwhile: take one at a time
                    pending.append(received.pop(0))
                for signum in pending:
                    log.info("signal_received", signal=signal.Signals(signum).name)
                if any(sig != signal.SIGHUP for sig in pending):
                    break
                if pending:
                    _reload(service, load_settings, reader, stop_received)
        finally:
            service.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return 0
