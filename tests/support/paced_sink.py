"""A sound card's pace for the tests: the reading end of a named pipe behind an ALSA ``file``
PCM, read in real time, so the player's writes block as they do on a card (the ``file`` PCM over
``null`` takes audio as fast as it is written). Used by the backpressure and Home Assistant
tests."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import threading
from pathlib import Path

from tests.support.make_tiny_voice import SAMPLE_RATE

__all__ = ["BYTES_PER_S", "PacedSink"]

BYTES_PER_S = SAMPLE_RATE * 2  # the tiny voice: 16-bit mono


class PacedSink:
    """The reading end of a named pipe behind an ALSA file PCM, read at ``bytes_per_s``.

    The pipe is opened read-write and non-blocking, so the player's open never waits for a
    reader and a close never ends the reading; :meth:`close` ends it. The pipe is shrunk to
    one page, about as much as a sound card buffers, so a held sink blocks the player soon.
    """

    def __init__(self, path: Path, bytes_per_s: int) -> None:
        self.path = path
        self.bytes_per_s = bytes_per_s
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, 4096)
        self._reading = threading.Event()
        self._reading.set()
        self._stop = threading.Event()
        self.received = 0
        self._thread = threading.Thread(target=self._read_loop, name="paced-sink", daemon=True)
        self._thread.start()

    def hold(self) -> None:
        """Stop reading: once the pipe is full the player's writes block."""
        self._reading.clear()

    def release(self) -> None:
        """Read at the sink's pace again."""
        self._reading.set()

    def close(self) -> None:
        self._stop.set()
        self._reading.set()
        self._thread.join(10)
        os.close(self._fd)

    def _read_loop(self) -> None:
        step = max(1, self.bytes_per_s // 50)  # about 20 ms of audio per read
        while not self._stop.is_set():
            if not self._reading.wait(0.05):
                continue
            ready, _, _ = select.select([self._fd], [], [], 0.05)
            if not ready:
                continue
            with contextlib.suppress(BlockingIOError):
                block = os.read(self._fd, step)
                self.received += len(block)
                self._stop.wait(len(block) / self.bytes_per_s)  # the card's pace
