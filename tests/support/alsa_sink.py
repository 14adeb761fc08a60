"""Test helpers: real alsa-lib PCMs that write into files, and ways to read them back.

:class:`AlsaConfig` writes an ALSA configuration of its own and points
``ALSA_CONFIG_PATH`` at it (through pytest's ``monkeypatch``). alsa-lib reads the
variable again and reloads the file whenever its path or modification time
changes, so each test gets its own PCMs in-process and tests stay independent of
their order. PCMs defined there:

* a ``type file`` PCM over an inline ``{ type null }`` slave writing raw S16_LE
  into a regular file; with ``truncate false`` alsa-lib writes each re-open into a
  new numbered file (``out.raw.0001``, ...), which :func:`read_samples` joins;
* the same over a named pipe (:class:`FifoSink`): the test decides when audio may
  flow (the player blocks in ``write`` while the pipe is full) and can "unplug"
  the device by closing the reading end, which makes the next write fail with EIO;
* a ``type plug`` PCM in front of a file PCM fixed at a given rate and channel
  count (ALSA converts).

:class:`Events` is the player's reporter (:class:`agent.outcomes.Reporter`): it only hands
each event on as a :class:`PlaybackEvent`, as the player's contract asks, and lets the test
wait for a given event.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.audio.format import AudioChunk, AudioFormat
from agent.audio.item import PlaybackEvent, PlayItem
from agent.audio.player import AudioPlayer
from agent.settings import AudioSettings
from tests.support.clock_card import ClockCard, build_plugin

VOICE_RATE = 22050
VOICE_FORMAT = AudioFormat(rate=VOICE_RATE, width=2, channels=1)
WAIT_S = 20.0  # generous upper bound for waiting on the player; never asserted as a timing

_mtime_counter = itertools.count(1)


class AlsaConfig:
    """An ALSA configuration file owned by one test."""

    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.directory = directory
        self.path = directory / "asound.conf"
        self._pcms: dict[str, str] = {}
        self._types: dict[str, str] = {}
        self.write()
        monkeypatch.setenv("ALSA_CONFIG_PATH", str(self.path))

    def add_file(self, name: str, path: Path | None = None, *, truncate: bool = False) -> Path:
        """Define PCM ``name`` writing raw frames to ``path``; returns it.

        Never truncated by default (each re-open writes a new numbered file). With
        ``truncate`` (as the system's ``file:`` PCM), alsa-lib opens a missing file without
        an error and only fails once it writes to it: once more than a buffer is queued.
        """
        path = path or self.directory / f"{name}.raw"
        self._pcms[name] = _file_pcm(path, truncate=truncate)
        self.write()
        return path

    def add_fifo(self, name: str) -> FifoSink:
        """Define PCM ``name`` writing into a named pipe read by the returned sink."""
        sink = FifoSink(self.directory / f"{name}.fifo")
        self._pcms[name] = _file_pcm(sink.path, truncate=True)
        self.write()
        return sink

    def add_pipe(self, name: str) -> Path:
        """Define PCM ``name`` writing into a named pipe that nobody reads yet; returns its path.

        alsa-lib's file plugin opens its file when the PCM is configured, with a plain
        blocking ``open()``: opening this PCM blocks until the test opens the reading end.
        """
        path = self.directory / f"{name}.pipe"
        os.mkfifo(path)
        self._pcms[name] = _file_pcm(path, truncate=True)
        self.write()
        return path

    def add_clock(self, name: str, rate: int = VOICE_RATE, channels: int = 1) -> ClockCard:
        """Define PCM ``name``: a card that plays in real time and records when each frame
        was due (:mod:`tests.support.clock_card`; the plugin is compiled once)."""
        card = ClockCard(build_plugin(Path(tempfile.gettempdir()) / "tts-agent-tests"),
                         self.directory / f"{name}.raw", rate, channels)
        self._types["clock"] = f'{{ lib "{card.library}" }}'
        self._pcms[name] = f'{{ type clock file "{card.path}" }}'
        self.write()
        return card

    def add_plug(self, name: str, slave: str, rate: int, channels: int) -> None:
        """Define PCM ``name``: ALSA's plug converter in front of ``slave`` at rate/channels."""
        self._pcms[name] = (
            f'{{ type plug slave {{ pcm "{slave}" rate {rate} channels {channels} '
            f"format S16_LE }} }}"
        )
        self.write()

    def remove(self, name: str) -> None:
        """Forget PCM ``name`` (opening it fails from now on)."""
        del self._pcms[name]
        self.write()

    def write(self) -> None:
        """Write the file atomically with a new modification time, so alsa-lib reloads it."""
        text = "".join(f"pcm_type.{name} {body}\n" for name, body in self._types.items())
        text += "".join(f"pcm.{name} {body}\n" for name, body in self._pcms.items())
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text or "# no PCMs\n", encoding="utf-8")
        stamp = time.time() + 10 * next(_mtime_counter)  # alsa-lib compares whole seconds
        os.utime(tmp, (stamp, stamp))
        tmp.replace(self.path)


def _file_pcm(path: Path, *, truncate: bool) -> str:
    return (
        f'{{ type file slave.pcm {{ type null }} file "{path}" format "raw" '
        f"truncate {'true' if truncate else 'false'} }}"
    )


class FifoSink:
    """The reading end of a named pipe behind a file PCM.

    Nothing is read until :meth:`release`, so the player's writes block once the
    pipe (64 KiB) and ALSA's buffer are full. :meth:`unplug` closes the reading end
    while held; :meth:`replug` lets the next writer connect again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._gate = threading.Event()
        self._unplug = threading.Event()
        self._plugged = threading.Event()
        self._plugged.set()
        self._stopped = False
        self._lock = threading.Lock()
        self._data = bytearray()
        self._thread = threading.Thread(target=self._read_loop, name="fifo-sink", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Let audio flow from now on."""
        self._gate.set()

    def unplug(self) -> None:
        """Close the reading end (only while not released): the writer gets EPIPE/EIO."""
        self._plugged.clear()
        self._unplug.set()

    def replug(self) -> None:
        """Accept a writer again."""
        self._unplug.clear()
        self._plugged.set()

    def data(self) -> bytes:
        """Everything read so far."""
        with self._lock:
            return bytes(self._data)

    def finish(self) -> bytes:
        """Stop reading once the writer has closed; return everything read."""
        self._stopped = True
        self._gate.set()
        self._plugged.set()
        self._unplug.clear()
        deadline = time.monotonic() + WAIT_S
        while self._thread.is_alive() and time.monotonic() < deadline:
            # Unblock a reader waiting in open() for a writer that will not come
            # (ENXIO when no reader is in open() right now).
            with contextlib.suppress(OSError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            self._thread.join(0.05)
        assert not self._thread.is_alive(), "FIFO reader did not end: is the PCM still open?"
        return self.data()

    def _read_loop(self) -> None:
        while not self._stopped:
            self._plugged.wait()
            with open(self.path, "rb", buffering=0) as pipe:  # blocks until a writer opens
                while True:
                    while not self._gate.wait(0.01):
                        if self._unplug.is_set():
                            break
                    if self._unplug.is_set():
                        break
                    block = pipe.read(65536)
                    if not block:
                        break
                    with self._lock:
                        self._data.extend(block)


class Events:
    """The player's reporter: hands events on to the test through a queue."""

    def __init__(self) -> None:
        self._queue: queue.Queue[PlaybackEvent] = queue.Queue()
        self.seen: list[PlaybackEvent] = []

    def is_open(self, request_id: str) -> bool:
        return True

    def note(self, request_id: str, **fields: object) -> None:
        return None

    def progress(self, request_id: str, event: Any, **fields: object) -> bool:
        detail = {k: v for k, v in fields.items() if isinstance(v, int | float)} or None
        self._queue.put(PlaybackEvent(event, request_id, detail=detail))  # hand on only
        return True

    def finish(self, request_id: str, event: Any, *, reason: str | None = None,
               audio_s: float | None = None) -> bool:
        self._queue.put(PlaybackEvent(event, request_id, reason, audio_s or 0.0))
        return True

    def wait_for(self, kind: str, request_id: str) -> PlaybackEvent:
        """The first ``kind`` event of ``request_id`` (earlier events stay in :attr:`seen`)."""
        for event in self.seen:
            if event.kind == kind and event.request_id == request_id:
                return event
        deadline = time.monotonic() + WAIT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {kind} event for {request_id}; seen {self.seen}")
            try:
                event = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(event)
            if event.kind == kind and event.request_id == request_id:
                return event

    def kinds(self, request_id: str) -> list[str]:
        """Kinds seen so far for ``request_id``, in order (drains the queue first)."""
        while True:
            try:
                self.seen.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return [e.kind for e in self.seen if e.request_id == request_id]


def audio_settings(device: str, **overrides: Any) -> AudioSettings:
    """Audio settings for tests: fast retries, small queue, no lead-in unless asked."""
    values: dict[str, Any] = {
        "device": device,
        "reopen_interval_s": 0.05,
        "keep_open_s": 30.0,
        "queue_max": 8,
    }
    values.update(overrides)
    return AudioSettings(**values)


@contextmanager
def running_player(settings: AudioSettings) -> Iterator[tuple[AudioPlayer, Events]]:
    """A started player and its event receiver; closed (and checked) on exit."""
    events = Events()
    player = AudioPlayer(settings, events)
    player.start()
    try:
        yield player, events
    finally:
        assert player.close(timeout=WAIT_S), "player thread did not end"


def wait_until(predicate: Any, what: str) -> None:
    """Wait (bounded) until ``predicate()`` is true; fails the test otherwise."""
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        threading.Event().wait(0.01)


def tone(seconds: float, freq: float, *, rate: int = VOICE_RATE, level: float = 0.2,
         offset: float = 0.3) -> np.ndarray:
    """int16 mono tone with a DC offset, so no sample is ever zero (silence is findable)."""
    t = np.arange(round(seconds * rate)) / rate
    wave = offset + level * np.sin(2 * np.pi * freq * t)
    return np.rint(wave * 32768).astype(np.int16)


def chunk(samples: np.ndarray, text: str = "", rate: int = VOICE_RATE) -> AudioChunk:
    """An AudioChunk of int16 mono samples."""
    return AudioChunk(samples.astype("<i2").tobytes(), AudioFormat(rate=rate), text)


def closed_item(request_id: str, *parts: np.ndarray, **kwargs: Any) -> PlayItem:
    """A PlayItem already holding ``parts`` and closed (synthesis finished)."""
    item = PlayItem(request_id, **kwargs)
    for part in parts:
        assert item.put(chunk(part))
    item.close()
    return item


def read_samples(data: bytes | Path, channels: int = 1) -> np.ndarray:
    """Raw S16_LE bytes, or what a file PCM wrote to a path, as int16 (frames, channels).

    For a path, the files of later re-opens (``path.0001``, ``path.0002``, ...) follow
    in order.
    """
    if isinstance(data, Path):
        parts = [data, *sorted(data.parent.glob(data.name + ".[0-9][0-9][0-9][0-9]"))]
        data = b"".join(p.read_bytes() for p in parts if p.exists())
    return np.frombuffer(data, dtype="<i2").reshape(-1, channels)


def trim_silence(samples: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(samples without leading/trailing all-zero frames, leading zeros, trailing zeros)."""
    frames = samples.reshape(len(samples), -1)
    loud = np.flatnonzero(np.any(frames != 0, axis=1))
    if len(loud) == 0:
        return samples[:0], len(samples), 0
    first, last = int(loud[0]), int(loud[-1])
    return samples[first:last + 1], first, len(samples) - last - 1
