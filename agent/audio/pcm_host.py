"""The player's side of the PCM helper process (:mod:`agent.audio.pcm_server`).

:class:`PcmHost` starts the helper; :meth:`PcmHost.open_pcm` returns a :class:`RemotePcm` with the
methods of a pyalsaaudio PCM that the device uses, each one a request the player thread waits for
in ``poll()`` without the interpreter lock and never past its deadline. A slow open is left
pending for the next attempt; any other late call kills the helper. Player thread only. Deadlines
and lingering helpers: docs/internals.md#the-players-side-of-the-pcm-helper.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import alsaaudio

import agent
from agent import jsonbound
from agent.audio import pcm_server as proto
from agent.logs import get_logger, helper_arguments

__all__ = ["MAX_LINGERING", "PcmHost", "RemotePcm"]

log = get_logger(__name__)

MAX_LINGERING = 4
"""Killed helpers that have not exited yet, beyond which no new helper is started."""
_START_S = 15.0
"""How long a new helper may take to start (an interpreter start on a slow board)."""
_REAP_S = 1.0
_COUNT = struct.Struct("<q")
_MAX_ANSWER = proto.MAX_PAYLOAD
_DROP_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
"""Only the agent's main process talks to systemd (``NotifyAccess=main``)."""


class _NoAnswer(Exception):
    """The helper did not answer before the deadline."""


class _Helper:
    """One helper process, its pipes, and the answer being read."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("the helper process needs pipes on stdin and stdout")
        self.process = process
        self.stdin = process.stdin
        self.to_fd = process.stdin.fileno()
        self.from_fd = process.stdout.fileno()
        os.set_blocking(self.to_fd, False)
        self._buffer = bytearray()
        self.pending_open: dict[str, Any] | None = None
        """The parameters of an OPEN sent whose answer has not come yet."""
        self.serial = 0
        """Counts the PCMs opened; a :class:`RemotePcm` of an earlier one is stale."""

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def send(self, op: int, payload: bytes, deadline: float) -> None:
        view = memoryview(proto.HEADER.pack(op, len(payload)) + payload)
        while view:
            if not _ready(self.to_fd, select.POLLOUT, deadline):
                raise _NoAnswer
            try:
                view = view[os.write(self.to_fd, view):]
            except BlockingIOError:
                continue
            except OSError as exc:  # EPIPE: it has exited
                raise alsaaudio.ALSAAudioError(self.gone()) from exc

    def answer(self, deadline: float) -> tuple[int, bytes]:
        """The next answer frame; what was read before a deadline passed is kept."""
        size = proto.HEADER.size
        while True:
            if len(self._buffer) >= size:
                status, length = proto.HEADER.unpack_from(self._buffer)
                if status not in (proto.OK, proto.ALSA_ERROR, proto.BAD_REQUEST) or (
                        length > _MAX_ANSWER):
                    raise alsaaudio.ALSAAudioError("the audio helper process sent garbage")
                if len(self._buffer) >= size + length:
                    payload = bytes(self._buffer[size:size + length])
                    del self._buffer[:size + length]
                    return status, payload
            if not _ready(self.from_fd, select.POLLIN, deadline):
                raise _NoAnswer
            block = os.read(self.from_fd, 65536)
            if not block:
                raise alsaaudio.ALSAAudioError(self.gone())
            self._buffer += block

    def gone(self) -> str:
        try:
            code = self.process.wait(_REAP_S)
        except subprocess.TimeoutExpired:
            return "the audio helper process stopped answering"
        return f"the audio helper process exited (status {code})"


def _ready(fd: int, event: int, deadline: float) -> bool:
    """Wait (without the interpreter lock) until ``fd`` is ready for ``event`` (or has hung
    up), at most until ``deadline``."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(math.ceil(max(0.0, deadline - time.monotonic()) * 1000)))


class PcmHost:
    """Starts the helper process and turns PCM calls into requests to it (player thread)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._helper: _Helper | None = None
        self._lingering: list[subprocess.Popen[bytes]] = []

    def open_pcm(self, **params: Any) -> RemotePcm:
        """Open a playback PCM in the helper; takes ``alsaaudio.PCM``'s keyword arguments
        (:data:`~agent.audio.pcm_server.OPEN_KEYS`) and raises its error."""
        if sorted(params) != sorted(proto.OPEN_KEYS):
            raise TypeError(f"open_pcm() takes exactly {', '.join(proto.OPEN_KEYS)}")
        helper = self._running()
        if helper.pending_open is not None:
            wanted = helper.pending_open
            answer = self._opened(helper, 0.0)  # collect it, or fail at once
            if wanted == params:
                return answer
            answer.close()
        try:
            helper.send(proto.OPEN, json.dumps(params).encode(),
                        time.monotonic() + self.timeout_s)
        except _NoAnswer:
            self._drop(helper, "it took no request")
            raise alsaaudio.ALSAAudioError("the audio helper process took no request") from None
        helper.pending_open = params
        return self._opened(helper, self.timeout_s)

    def _opened(self, helper: _Helper, wait_s: float) -> RemotePcm:
        """The answer to the pending OPEN, waiting ``wait_s`` at most."""
        try:
            status, payload = helper.answer(time.monotonic() + wait_s)
        except _NoAnswer:
            raise alsaaudio.ALSAAudioError(  # the same text each time: health sees no change
                f"the device did not answer within {self.timeout_s:g} s "
                "(its open is blocked; the agent keeps waiting for it)") from None
        except alsaaudio.ALSAAudioError as exc:
            self._drop(helper, str(exc))
            raise
        helper.pending_open = None
        if status != proto.OK:
            raise alsaaudio.ALSAAudioError(payload.decode("utf-8", "replace"))
        try:
            info: Any = jsonbound.loads(payload, max_bytes=proto.MAX_PAYLOAD)
            buffer_s, max_write = _sizes(info)
        except (ValueError, TypeError, AttributeError):
            self._drop(helper, "it sent garbage")
            raise alsaaudio.ALSAAudioError("the audio helper process sent garbage") from None
        helper.serial += 1
        return RemotePcm(self, helper, helper.serial, info, buffer_s=buffer_s,
                         max_write=max_write)

    def owns(self, pcm: RemotePcm) -> bool:
        """``pcm`` is the one open in the running helper."""
        return pcm.helper is self._helper and pcm.serial == pcm.helper.serial

    def call(self, pcm: RemotePcm, op: int, payload: bytes, what: str) -> bytes:
        """One request about ``pcm``; its answer's payload."""
        helper = pcm.helper
        if not self.owns(pcm):
            raise alsaaudio.ALSAAudioError("the device was closed (its helper process ended)")
        limit = self.timeout_s + pcm.buffer_s
        deadline = time.monotonic() + limit
        try:
            helper.send(op, payload, deadline)
            status, answer = helper.answer(deadline)
        except _NoAnswer:
            self._drop(helper, f"{what} blocked")
            raise alsaaudio.ALSAAudioError(
                f"the device did not answer within {limit:.1f} s ({what} blocked; "
                "its helper process was stopped)") from None
        except alsaaudio.ALSAAudioError as exc:
            self._drop(helper, str(exc))
            raise
        if status != proto.OK:
            raise alsaaudio.ALSAAudioError(answer.decode("utf-8", "replace"))
        return answer

    def shutdown(self) -> None:
        """End the helper: at once when it is blocked, else after its PCM is closed."""
        helper, self._helper = self._helper, None
        if helper is not None:
            if helper.pending_open is not None:
                self._drop(helper, "shutting down")
            else:
                helper.stdin.close()  # it closes its PCM and exits
                try:
                    helper.process.wait(self.timeout_s)
                except subprocess.TimeoutExpired:
                    self._drop(helper, "it did not exit")
                else:
                    self._close_pipes(helper.process)
        self._reap()

    # -- the process -----------------------------------------------------------------------

    def _running(self) -> _Helper:
        helper = self._helper
        if helper is not None and helper.process.poll() is None:
            return helper
        if helper is not None:
            self._drop(helper, "it had exited")
        self._reap()
        if len(self._lingering) >= MAX_LINGERING:
            raise alsaaudio.ALSAAudioError(
                f"{len(self._lingering)} earlier audio helper processes were killed but have "
                "not exited (stuck in the kernel); not starting another")
        helper = self._start()
        self._helper = helper
        return helper

    def _start(self) -> _Helper:
        env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
        root = str(Path(agent.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "agent.audio.pcm_server", str(os.getpid()),
                 *helper_arguments()],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError as exc:
            raise alsaaudio.ALSAAudioError(f"cannot start the audio helper process: {exc}") from exc
        helper = _Helper(process)
        try:
            status, payload = helper.answer(time.monotonic() + _START_S)
        except _NoAnswer:
            self._drop(helper, "it did not start")
            raise alsaaudio.ALSAAudioError(
                f"the audio helper process did not start within {_START_S:g} s") from None
        except alsaaudio.ALSAAudioError as exc:
            self._drop(helper, str(exc))
            raise
        if (status, payload) != (proto.OK, proto.READY):
            self._drop(helper, "it did not start")
            raise alsaaudio.ALSAAudioError("the audio helper process did not start")
        log.debug("audio_helper_started", pid=helper.pid)
        return helper

    def _drop(self, helper: _Helper, why: str) -> None:
        """Give up on ``helper``: kill it if it still runs, reap it now or later."""
        if helper.process.poll() is None:
            log.warning("audio_helper_killed", pid=helper.pid, reason=why)
            helper.process.kill()
        else:
            log.warning("audio_helper_exited", pid=helper.pid,
                        status=helper.process.returncode, reason=why)
        if self._helper is helper:
            self._helper = None
        try:
            helper.process.wait(_REAP_S)
        except subprocess.TimeoutExpired:
            self._lingering.append(helper.process)
            return
        self._close_pipes(helper.process)

    def _reap(self) -> None:
        still = []
        for process in self._lingering:
            if process.poll() is None:
                still.append(process)
            else:
                self._close_pipes(process)
        self._lingering = still

    @staticmethod
    def _close_pipes(process: subprocess.Popen[bytes]) -> None:
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _sizes(info: Any) -> tuple[float, int]:
    """(buffer length in seconds, most bytes per write) from ``pcm.info()``."""
    rate = max(1, int(info.get("rate") or 1))
    frame = max(1, int(info.get("channels") or 1) * int(info.get("physical_bits") or 8) // 8)
    return int(info.get("buffer_size") or 0) / rate, max(1, proto.MAX_PAYLOAD // frame) * frame


class RemotePcm:
    """A PCM open in the helper, with the pyalsaaudio PCM methods the device uses."""

    def __init__(self, host: PcmHost, helper: _Helper, serial: int, info: dict[str, Any],
                 *, buffer_s: float, max_write: int) -> None:
        self.host = host
        self.helper = helper
        self.serial = serial
        self._info = info
        self.buffer_s = buffer_s
        """The length of the device's buffer (s): a close drains it."""
        self._max_write = max_write
        self._closed = False

    def info(self) -> dict[str, Any]:
        return dict(self._info)

    def write(self, data: bytes | memoryview) -> int:
        """Like ``PCM.write`` (frames written, 0 while full, -EPIPE after an underrun); at
        most :data:`~agent.audio.pcm_server.MAX_PAYLOAD` bytes go per call."""
        piece = bytes(memoryview(data)[:self._max_write])
        return int(_COUNT.unpack(self.host.call(self, proto.WRITE, piece, "write"))[0])

    def avail(self) -> int:
        return int(_COUNT.unpack(self.host.call(self, proto.AVAIL, b"", "avail"))[0])

    def drop(self) -> None:
        self.host.call(self, proto.DROP, b"", "drop")

    def close(self) -> None:
        """Close it in the helper (draining, like pyalsaaudio); nothing when already gone."""
        if self._closed:
            return
        self._closed = True
        if self.host.owns(self):
            self.host.call(self, proto.CLOSE, b"", "close")
