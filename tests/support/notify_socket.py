"""A stand-in for systemd's notify socket: an AF_UNIX datagram socket the test binds.

Like systemd it turns on SO_PASSCRED, so every message carries the sender's PID, which
systemd checks against the main PID (``NotifyAccess=main``).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

_UCRED = struct.Struct("iII")  # pid, uid, gid


@dataclass(frozen=True)
class Message:
    fields: dict[str, str]
    pid: int | None

    def __contains__(self, key: str) -> bool:
        return key in self.fields


class NotifySocket:
    """Bound at ``path`` (a filesystem socket) or, with ``abstract=NAME``, at ``@NAME``."""

    def __init__(self, path: Path | None = None, *, abstract: str | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        if abstract is not None:
            self.sock.bind("\0" + abstract)
            self.address = "@" + abstract
        else:
            assert path is not None
            self.sock.bind(str(path))
            self.address = str(path)

    def env(self, **extra: str) -> dict[str, str]:
        return {"NOTIFY_SOCKET": self.address, **extra}

    def receive(self, timeout: float = 10.0) -> Message | None:
        """The next message, or ``None`` when none arrives within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data, ancdata, _flags, _addr = self.sock.recvmsg(
                4096, socket.CMSG_SPACE(_UCRED.size))
        except TimeoutError:
            return None
        pid = None
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = _UCRED.unpack(payload[:_UCRED.size])[0]
        text = data.decode()
        assert text.endswith("\n"), f"message not newline-terminated: {text!r}"
        fields = dict(line.split("=", 1) for line in text.splitlines())
        return Message(fields, pid)

    def receive_until(self, key: str, timeout: float = 10.0) -> list[Message]:
        """Messages up to and including the first one carrying ``key``; fails on timeout."""
        deadline = time.monotonic() + timeout
        seen: list[Message] = []
        while True:
            message = self.receive(max(0.0, deadline - time.monotonic()))
            assert message is not None, f"no {key} within {timeout} s; got {seen}"
            seen.append(message)
            if key in message:
                return seen

    def drain(self) -> list[Message]:
        """Every message already queued, without waiting."""
        messages = []
        while (message := self.receive(timeout=0.001)) is not None:
            messages.append(message)
        return messages

    def close(self) -> None:
        self.sock.close()
