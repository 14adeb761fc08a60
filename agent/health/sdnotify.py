"""The systemd notify protocol, spoken directly (no libsystemd).

:class:`Notifier` sends ``KEY=VALUE`` datagrams (``READY``, ``STATUS``, ``WATCHDOG``,
``RELOADING``, ``STOPPING``, ``EXTEND_TIMEOUT_USEC``) to ``$NOTIFY_SOCKET``. Outside systemd every
call is a cheap no-op returning ``False``; sending never raises. Any thread; every message opens
its own socket. The messages: docs/internals.md#the-systemd-notify-protocol.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Mapping, MutableMapping

from agent.logs import get_logger

__all__ = ["MAX_STATUS_CHARS", "Notifier"]

log = get_logger(__name__)

MAX_STATUS_CHARS = 200
"""``STATUS=`` texts are cut to this length (systemctl shows one line)."""

_MAX_SUN_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
_ENV_KEYS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def _one_line(text: str) -> str:
    """``text`` without control characters, cut to :data:`MAX_STATUS_CHARS`."""
    clean = "".join(c if c.isprintable() else " " for c in text).strip()
    return clean[:MAX_STATUS_CHARS]


class Notifier:
    """Sends notify messages to systemd's socket; a no-op when ``address`` is ``None``.

    ``address`` is ``$NOTIFY_SOCKET`` as systemd sets it: an absolute path or ``@name``
    (abstract namespace). ``watchdog_usec`` and ``watchdog_pid`` are ``$WATCHDOG_USEC`` and
    ``$WATCHDOG_PID``; use :meth:`from_environ` to read all three.
    """

    def __init__(
        self,
        address: str | None,
        *,
        watchdog_usec: int | None = None,
        watchdog_pid: int | None = None,
    ) -> None:
        self._address = self._socket_address(address)
        self.address = address if self._address is not None else None
        self._watchdog_usec = watchdog_usec
        self._watchdog_pid = watchdog_pid
        self._lock = threading.Lock()
        self._failing = False

    @classmethod
    def from_environ(
        cls, environ: MutableMapping[str, str] | None = None, *, unset: bool = False
    ) -> Notifier:
        """A notifier for the socket systemd named in the environment.

        ``unset=True`` removes ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID``
        afterwards, so child processes cannot talk to systemd in our name.
        """
        env: MutableMapping[str, str] = os.environ if environ is None else environ
        notifier = cls(
            env.get("NOTIFY_SOCKET") or None,
            watchdog_usec=_positive_int(env, "WATCHDOG_USEC"),
            watchdog_pid=_positive_int(env, "WATCHDOG_PID"),
        )
        if unset:
            for key in _ENV_KEYS:
                env.pop(key, None)
        return notifier

    @staticmethod
    def _socket_address(address: str | None) -> str | None:
        if not address:
            return None
        if address.startswith("@"):
            target = "\0" + address[1:]
        elif address.startswith("/"):
            target = address
        else:
            # vsock: and other transports are not spoken here.
            log.warning("sd_notify_unsupported_socket", address=address)
            return None
        if len(target.encode()) > _MAX_SUN_PATH:
            log.warning("sd_notify_socket_path_too_long", address=address)
            return None
        return target

    @property
    def enabled(self) -> bool:
        """Whether messages go anywhere (we run under systemd with ``Type=notify``)."""
        return self._address is not None

    def watchdog_interval_s(self) -> float | None:
        """The watchdog timeout systemd enforces for this process, or ``None`` if none.

        ``None`` too when ``$WATCHDOG_PID`` names another process (the variables were
        inherited, not meant for us) or when there is no notify socket to ping.
        """
        if not self.enabled or self._watchdog_usec is None:
            return None
        if self._watchdog_pid is not None and self._watchdog_pid != os.getpid():
            return None
        return self._watchdog_usec / 1_000_000

    # -- messages ------------------------------------------------------------------------

    def send(self, fields: Mapping[str, str | int]) -> bool:
        """Send one message of ``KEY=VALUE`` lines; ``True`` when systemd's socket took it.

        Values must be single-line; :meth:`status` and friends clean free text first.
        """
        if self._address is None:
            return False
        payload = "".join(f"{key}={value}\n" for key, value in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(payload, self._address)
        except OSError as exc:
            with self._lock:
                first, self._failing = not self._failing, True
            if first:
                log.warning("sd_notify_failed", address=self.address, error=str(exc),
                            message=sorted(fields))
            return False
        with self._lock:
            recovered, self._failing = self._failing, False
        if recovered:
            log.info("sd_notify_recovered", address=self.address)
        return True

    def ready(self, status: str | None = None) -> bool:
        """``READY=1``: start-up (or a reload) is complete and the agent serves."""
        return self.send(_with_status({"READY": 1}, status))

    def status(self, text: str) -> bool:
        """``STATUS=``: a one-line summary for ``systemctl status``."""
        return self.send({"STATUS": _one_line(text)})

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: the service is making progress."""
        return self.send({"WATCHDOG": 1})

    def reloading(self, status: str | None = None) -> bool:
        """``RELOADING=1`` with the ``CLOCK_MONOTONIC`` time systemd's ``notify-reload`` needs.

        Follow it with :meth:`ready` once the new configuration is in force (or the old one
        is kept).
        """
        now_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send(_with_status({"RELOADING": 1, "MONOTONIC_USEC": now_usec}, status))

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1``: shutdown has begun."""
        return self.send(_with_status({"STOPPING": 1}, status))

    def extend_timeout(self, seconds: float) -> bool:
        """``EXTEND_TIMEOUT_USEC=``: the current start-up/shutdown step needs ``seconds`` more."""
        return self.send({"EXTEND_TIMEOUT_USEC": max(0, int(seconds * 1_000_000))})


def _with_status(fields: dict[str, str | int], status: str | None) -> dict[str, str | int]:
    if status is not None:
        fields["STATUS"] = _one_line(status)
    return fields


def _positive_int(env: Mapping[str, str], key: str) -> int | None:
    raw = env.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        log.warning("sd_notify_bad_environment", variable=key, value=raw[:32])
        return None
    return value if value > 0 else None
