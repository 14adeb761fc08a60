"""The main thread's loop: run a service until SIGTERM or SIGINT, reload it on SIGHUP.

The signal handlers only record the signal and wake the main thread; the work (start, READY,
reload, stop) happens on the main thread, one signal at a time, in the order they came.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.settings import Settings

__all__ = ["Service", "run_until_signal"]

log = get_logger(__name__)


class Service(Protocol):
    """What the loop drives (:class:`agent.service.AgentService`)."""

    def start(self) -> None: ...

    def notify_ready(self) -> None: ...

    def reload(self, load_settings: Callable[[], Settings] | None = None) -> str: ...

    def stop(self) -> bool: ...


def run_until_signal(service: Service,
                     load_settings: Callable[[], Settings] | None = None) -> int:
    """Run ``service`` until SIGTERM or SIGINT; exit status 0. Main thread only.

    Start, then ``READY=1`` (the default voice is warm) unless a stop signal came during
    the start. SIGHUP reloads (``service.reload``, re-reading the settings through
    ``load_settings``); SIGTERM/SIGINT stop it gracefully. The previous handlers are put
    back afterwards.
    """
    wake = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        wake.set()

    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        service.start()
        if not any(sig != signal.SIGHUP for sig in received):
            service.notify_ready()
        while True:
            wake.wait()
            wake.clear()
            pending = []
            while received:  # the handler may append meanwhile: take one at a time
                pending.append(received.pop(0))
            for signum in pending:
                log.info("signal_received", signal=signal.Signals(signum).name)
            if any(sig != signal.SIGHUP for sig in pending):
                break
            if pending:
                service.reload(load_settings)
    finally:
        service.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
