"""Chimes: short WAV earcons, played by name before an announcement (docs/chimes.md).

A chime is ``<chimes.dir>/NAME.wav``: 16-bit PCM (the plain or the extensible header), mono or
stereo, 8000-48000 Hz, at most :data:`MAX_CHIME_BYTES` and :data:`MAX_CHIME_S`. Its name comes
from the network (a speak's ``chime``, SSML ``<audio src>``), so it is checked before it touches
the file system: a plain name (letters, digits, ``_``, ``-``), never a path. It is opened
without following a link and must be a regular file (a FIFO is refused without blocking).

:class:`Chimes` reads a chime once and keeps its samples; a file that changes (size, mtime or
inode) is read again at its next use, so chimes can be replaced while the agent runs. Every
refusal is a :class:`ChimeError` whose message is the one-line reason.
"""

from __future__ import annotations

import io
import os
import re
import stat
import threading
import uuid
import wave
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.audio.format import AudioChunk, AudioFormat
from agent.logs import get_logger
from agent.settings import CHIME_NAME_PATTERN

__all__ = [
    "MAX_CHIMES",
    "MAX_CHIME_BYTES",
    "MAX_CHIME_S",
    "ChimeError",
    "Chimes",
    "check_name",
    "read_chime",
]

log = get_logger(__name__)

MAX_CHIME_BYTES = 4 << 20
"""The largest chime file read (4 MiB: about 21 s of 48 kHz stereo)."""
MAX_CHIME_S = 10.0
"""The longest chime played: it comes before an announcement, not instead of one."""
MAX_CHIMES = 256
"""The most files :meth:`Chimes.names` looks at in the directory."""
RATES = (8000, 48000)
"""The sample rates a chime may have (inclusive)."""

_NAME = re.compile(CHIME_NAME_PATTERN)
_EXTENSIBLE = 0xFFFE
"""``WAVE_FORMAT_EXTENSIBLE``: the format code is in the fmt chunk's subformat GUID."""
_GUID_TAIL = bytes.fromhex("00001000800000aa00389b71")
"""The last 12 bytes of every ``KSDATAFORMAT_SUBTYPE_*`` GUID of a WAVE format code (the first
4: the code, little-endian; PCM's GUID is 00000001-0000-0010-8000-00aa00389b71)."""
_SUBFORMATS = {1: "PCM", 2: "Microsoft ADPCM", 3: "IEEE float", 6: "A-law", 7: "mu-law",
               0x11: "IMA ADPCM", 0x55: "MPEG layer 3"}

PriorityName = Literal["low", "normal", "high", "urgent"]


class ChimeError(ValueError):
    """A chime cannot be played; the message says why, in one line."""


def check_name(name: str) -> str:
    """``name`` if it is a plain chime name; raises :class:`ChimeError` otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ChimeError(f"chime name {str(name)[:80]!r} is not a plain name "
                         "(letters, digits, _ and -, at most 64)")
    return name


def read_chime(name: str, data: bytes) -> AudioChunk:
    """The samples of a chime file's bytes; raises :class:`ChimeError` with the reason."""
    data = _plain_header(name, data)
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            if wav.getcomptype() != "NONE":
                raise ChimeError(f"chime {name!r} is compressed ({wav.getcompname()}); "
                                 "chimes must be 16-bit PCM")
            width, channels, rate = wav.getsampwidth(), wav.getnchannels(), wav.getframerate()
            claimed = wav.getnframes()
            _check_format(name, width, channels, rate)
            if claimed > MAX_CHIME_S * rate:
                raise ChimeError(f"chime {name!r} lasts {claimed / rate:.1f} s; "
                                 f"chimes are at most {MAX_CHIME_S:g} s")
            audio = wav.readframes(claimed)
    except (wave.Error, EOFError) as exc:
        raise ChimeError(f"chime {name!r} is not a WAV file the agent plays: {exc}") from None
    fmt = AudioFormat(rate=rate, width=2, channels=channels)
    frames = len(audio) // fmt.frame_bytes
    if frames != claimed:
        raise ChimeError(f"chime {name!r} is truncated: its header says {claimed} frames, "
                         f"the file holds {frames}")
    if frames == 0:
        raise ChimeError(f"chime {name!r} holds no audio")
    return AudioChunk(audio, fmt, "")


def _plain_header(name: str, data: bytes) -> bytes:
    """``data`` with an extensible fmt chunk whose subformat is PCM written as the plain PCM
    one (the :mod:`wave` of Python 3.11 reads no other); any other file as it is. Raises
    :class:`ChimeError` for an extensible header of another subformat."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    offset = 12
    while offset + 8 <= len(data) and data[offset:offset + 4] != b"fmt ":
        size = int.from_bytes(data[offset + 4:offset + 8], "little")
        offset += 8 + size + (size & 1)
    size = int.from_bytes(data[offset + 4:offset + 8], "little")
    body = data[offset + 8:offset + 8 + size]
    if data[offset:offset + 4] != b"fmt " or len(body) < 16 \
            or int.from_bytes(body[:2], "little") != _EXTENSIBLE:
        return data
    if len(body) < 40:
        raise ChimeError(f"chime {name!r} has an extensible WAV header of {len(body)} bytes, "
                         "without its subformat (40 bytes); chimes must be 16-bit PCM")
    guid = body[24:40]
    code = int.from_bytes(guid[:4], "little")
    if guid[4:] != _GUID_TAIL or code != 1:
        known = f" ({_SUBFORMATS.get(code, 'unknown')})" if guid[4:] == _GUID_TAIL else ""
        raise ChimeError(f"chime {name!r} has an extensible WAV header of subformat "
                         f"{uuid.UUID(bytes_le=guid)}{known}; chimes must be 16-bit PCM")
    plain = b"fmt " + (16).to_bytes(4, "little") + (1).to_bytes(2, "little") + body[2:16]
    rest = data[12:offset] + plain + data[offset + 8 + size + (size & 1):]
    return b"RIFF" + (4 + len(rest)).to_bytes(4, "little") + b"WAVE" + rest


def _check_format(name: str, width: int, channels: int, rate: int) -> None:
    if width != 2:
        raise ChimeError(f"chime {name!r} is {8 * width}-bit; chimes must be 16-bit PCM")
    if channels not in (1, 2):
        raise ChimeError(f"chime {name!r} has {channels} channels; chimes must be mono "
                         "or stereo")
    if not RATES[0] <= rate <= RATES[1]:
        raise ChimeError(f"chime {name!r} is at {rate} Hz; chimes must be at "
                         f"{RATES[0]}-{RATES[1]} Hz")


def _read_all(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of an open regular file."""
    parts, size = [], 0
    while size < limit:
        part = os.read(fd, min(1 << 20, limit - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class _Loaded:
    stamp: tuple[int, int, int, int]
    """(device, inode, size, mtime_ns) of the file the chunk was read from."""
    chunk: AudioChunk


class Chimes:
    """The chimes in ``directory``; ``by_priority`` names the chime of each priority level
    (``chimes.by_priority``). Thread-safe."""

    def __init__(self, directory: Path,
                 by_priority: Mapping[PriorityName, str] | None = None) -> None:
        self.directory = directory
        self.by_priority: dict[str, str] = {str(k): v for k, v in (by_priority or {}).items()}
        self._lock = threading.Lock()
        self._loaded: dict[str, _Loaded] = {}
        self._failed: dict[str, tuple[tuple[int, int, int, int], str]] = {}

    def get(self, name: str) -> AudioChunk:
        """The chime ``name``'s samples; raises :class:`ChimeError` with the reason."""
        check_name(name)
        path = self.directory / f"{name}.wav"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ChimeError(self._unknown(name)) from None
        except OSError as exc:
            if os.path.islink(path):
                raise ChimeError(f"chime {name!r} is a symbolic link; chimes must be regular "
                                 "files in the chimes directory") from None
            raise ChimeError(f"chime {name!r} cannot be read: {exc.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ChimeError(f"chime {name!r} is not a regular file")
            stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            with self._lock:
                loaded = self._loaded.get(name)
            if loaded is not None and loaded.stamp == stamp:
                return loaded.chunk
            if info.st_size > MAX_CHIME_BYTES:
                raise ChimeError(f"chime {name!r} is {info.st_size} bytes; chimes are at most "
                                 f"{MAX_CHIME_BYTES} bytes")
            data = _read_all(fd, MAX_CHIME_BYTES + 1)
        finally:
            os.close(fd)
        chunk = self._parse(name, stamp, data)
        with self._lock:
            self._loaded[name] = _Loaded(stamp, chunk)
        return chunk

    def _parse(self, name: str, stamp: tuple[int, int, int, int], data: bytes) -> AudioChunk:
        try:
            return read_chime(name, data)
        except ChimeError as exc:
            with self._lock:
                seen = self._failed.get(name)
                self._failed[name] = (stamp, str(exc))
            if seen is None or seen[0] != stamp:  # once per version of the file
                log.warning("chime_refused", chime=name, reason=str(exc))
            raise

    def _unknown(self, name: str) -> str:
        have = ", ".join(self.names()) or "none"
        return f"unknown chime {name!r} (available: {have})"

    def names(self) -> list[str]:
        """The chimes that can be played, sorted (files that fail their checks left out)."""
        try:
            with os.scandir(self.directory) as entries:
                candidates = []
                for count, entry in enumerate(entries):
                    if count >= MAX_CHIMES:
                        break
                    stem, dot, ext = entry.name.rpartition(".")
                    if dot and ext == "wav" and _NAME.fullmatch(stem):
                        candidates.append(stem)
        except OSError:
            return []
        good = []
        for name in sorted(candidates):
            try:
                self.get(name)
            except ChimeError:
                continue
            good.append(name)
        return good

    def default_for(self, priority: str) -> str | None:
        """The chime every request of ``priority`` (a level's name) plays, if any."""
        return self.by_priority.get(priority)
