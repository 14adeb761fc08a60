"""The PCM helper process: it owns the player's playback PCM and makes every ALSA call on it.

pyalsaaudio keeps the interpreter lock while it opens, configures, stops and closes a PCM, so a
device that blocks there would stop every thread of the agent; here it blocks only this
process, which :class:`agent.audio.pcm_host.PcmHost` starts (``python -m
agent.audio.pcm_server PARENT_PID [LEVEL FORMAT]``, never by hand) and waits for with a
deadline. Requests and answers are frames of :data:`HEADER` over stdin and stdout. Why, how it
starts and ends, and the protocol: docs/internals.md#the-pcm-helper-process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import sys
from typing import Any

from agent import jsonbound

__all__ = ["ALSA_ERROR", "AVAIL", "BAD_REQUEST", "CLOSE", "DROP", "HEADER", "MAX_PAYLOAD",
           "OK", "OPEN", "OPEN_KEYS", "READY", "WRITE", "main"]

HEADER = struct.Struct("<BI")
"""One frame's header: operation (request) or status (answer), payload length."""
OPEN, WRITE, AVAIL, DROP, CLOSE = b"OWADC"
OK, ALSA_ERROR, BAD_REQUEST = 0, 1, 2
MAX_PAYLOAD = 1 << 20
"""Largest payload either side sends (the host writes audio in pieces of at most this)."""
READY = b"pcm-server ready"
OPEN_KEYS = ("type", "mode", "device", "rate", "channels", "format", "periodsize", "periods")
"""The keyword arguments of ``alsaaudio.PCM`` that OPEN takes, all of them."""
_COUNT = struct.Struct("<q")
_PR_SET_PDEATHSIG = 1


class _Server:
    """One PCM at a time, and the ALSA calls on it."""

    def __init__(self) -> None:
        import alsaaudio  # here, so importing the constants above loads no ALSA binding

        self._alsa: Any = alsaaudio
        self._pcm: Any = None

    def handle(self, op: int, payload: bytes) -> tuple[int, bytes]:
        try:
            return OK, self._dispatch(op, payload)
        except self._alsa.ALSAAudioError as exc:
            return ALSA_ERROR, str(exc).encode("utf-8", "replace")[:MAX_PAYLOAD]
        except (ValueError, TypeError, KeyError) as exc:
            return BAD_REQUEST, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:4096]

    def _dispatch(self, op: int, payload: bytes) -> bytes:
        if op == OPEN:
            return self._open(payload)
        if op == CLOSE:
            self.close()
            return b""
        if self._pcm is None:
            raise ValueError("no PCM is open")
        if op == WRITE:
            return _COUNT.pack(int(self._pcm.write(payload)))
        if op == AVAIL:
            return _COUNT.pack(int(self._pcm.avail()))
        if op == DROP:
            self._pcm.drop()
            return b""
        raise ValueError(f"unknown operation {op}")

    def _open(self, payload: bytes) -> bytes:
        params = jsonbound.loads(payload, max_bytes=MAX_PAYLOAD)
        if not isinstance(params, dict) or sorted(params) != sorted(OPEN_KEYS):
            raise ValueError(f"OPEN takes exactly {', '.join(OPEN_KEYS)}")
        device = params["device"]
        numbers = {k: params[k] for k in OPEN_KEYS if k != "device"}
        if not isinstance(device, str) or not all(type(v) is int for v in numbers.values()):
            raise TypeError("OPEN takes a device name and integers")
        self.close()
        self._pcm = self._alsa.PCM(device=device, **numbers)
        return json.dumps(self._pcm.info(), default=str).encode()

    def close(self) -> None:
        pcm, self._pcm = self._pcm, None
        if pcm is not None:
            pcm.close()

    def close_quietly(self) -> None:
        """On the way out: close the PCM; an error no longer has anyone to go to."""
        with contextlib.suppress(self._alsa.ALSAAudioError):
            self.close()


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of file."""
    parts = bytearray()
    while len(parts) < size:
        block = os.read(fd, size - len(parts))
        if not block:
            return None
        parts += block
    return bytes(parts)


def _send(fd: int, status: int, payload: bytes) -> None:
    view = memoryview(HEADER.pack(status, len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _die_with_parent(parent: int) -> None:
    """Be killed when the thread that started us ends (Linux); exit if it already has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the end of stdin still ends us
    if os.getppid() != parent:
        sys.exit(0)


def main(argv: list[str]) -> int:
    """Serve requests on stdin until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = os.dup(1)
    os.dup2(2, 1)  # stray output (alsa-lib, Python) goes to stderr, never into the protocol
    if len(argv) > 1:
        _die_with_parent(int(argv[1]))
    if len(argv) > 3:
        from agent.logs import configure_logging

        configure_logging(argv[2], argv[3])
    from agent.audio.alsa_log import route_alsa_messages

    route_alsa_messages()  # "ALSA lib ..." lines become log lines (hidden below info)
    server = _Server()
    _send(out, OK, READY)
    try:
        while (header := _read_exact(0, HEADER.size)) is not None:
            op, size = HEADER.unpack(header)
            if size > MAX_PAYLOAD:
                _send(out, BAD_REQUEST, b"payload too large")
                return 2
            payload = _read_exact(0, size)
            if payload is None:
                break
            _send(out, *server.handle(op, payload))
    except BrokenPipeError:
        return 1  # the host has gone
    finally:
        server.close_quietly()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
