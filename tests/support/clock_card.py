"""A sound card with a clock for the tests: alsa-lib's I/O-plugin API running
``tests/support/alsa_clock/pcm_clock.c``, which plays in real time (so ALSA's delay and avail
are true, as on a card) and records each frame it played with the moment it was due at the
speaker. Synchronized starts (#30) are measured on it.

:func:`build_plugin` compiles the plugin once (gcc and libasound2-dev, both installed by
``build.sh``) into a directory keyed by the source's hash; :class:`ClockCard` is one card:
the ALSA configuration lines that define it and :meth:`ClockCard.onsets`, the Unix times at
which each burst of sound after a second or more of silence was due.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

__all__ = ["ClockCard", "build_plugin"]

_SOURCE = Path(__file__).with_name("alsa_clock") / "pcm_clock.c"


def build_plugin(cache: Path) -> Path:
    """The directory holding ``libasound_module_pcm_clock.so``, compiled if needed."""
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:16]
    directory = cache / f"alsa-clock-{digest}"
    library = directory / "libasound_module_pcm_clock.so"
    if not library.exists():
        gcc = shutil.which("gcc")
        if gcc is None:
            raise RuntimeError("the clock card needs gcc (and libasound2-dev): ./build.sh test")
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f".{os.getpid()}.so"
        subprocess.run([gcc, "-O2", "-Wall", "-shared", "-fPIC", "-DPIC", "-o", str(partial),
                        str(_SOURCE), "-lasound"], check=True, capture_output=True)
        partial.replace(library)
    return library


class ClockCard:
    """One clock card writing into ``path`` (raw S16_LE, ``channels``; each run at the rate it
    was opened with, which its start line records; ``rate`` is the tests' expectation)."""

    def __init__(self, library: Path, path: Path, rate: int, channels: int = 1) -> None:
        self.library = library
        self.path = path
        self.rate = rate
        self.channels = channels

    def config(self, name: str) -> str:
        """ALSA configuration defining the PCM ``name`` (and the plugin type), for a process
        with an ALSA configuration of its own (the benches')."""
        return (f'pcm_type.clock {{ lib "{self.library}" }}\n'
                f'pcm.{name} {{ type clock file "{self.path}" }}\n')

    def frames(self) -> np.ndarray:
        """Every frame played so far, in order."""
        if not self.path.exists():
            return np.zeros((0, self.channels), dtype=np.int16)
        return np.fromfile(self.path, dtype="<i2").reshape(-1, self.channels)

    def due(self, index: int) -> float:
        """Unix time at which played frame ``index`` was due at the speaker."""
        at, first, rate = _run_of(index, self._runs())
        return at + (index - first) / rate

    def onsets(self, quiet_s: float = 1.0) -> list[float]:
        """Unix times at which the first loud frame of each run of the stream (from a start
        to a stop or underrun), and each loud frame after ``quiet_s`` or more of silence
        within a run, was due at the speaker."""
        if not self.path.exists():
            return []
        frames = np.fromfile(self.path, dtype="<i2").reshape(-1, self.channels)
        loud = np.flatnonzero(np.any(frames != 0, axis=1))
        runs = self._runs()
        quiet = int(quiet_s * self.rate)
        found, previous, run = [], None, None
        for index in (int(i) for i in loud):
            now = _run_of(index, runs)
            if now != run or previous is None or index - previous > quiet:
                found.append(now[0] + (index - now[1]) / now[2])
            previous, run = index, now
        return found

    def _runs(self) -> list[tuple[float, int, int]]:
        """(Unix time of the start, frames in the file before it, rate) of each start."""
        starts = self.path.with_name(self.path.name + ".starts")
        runs = []
        for line in starts.read_text().splitlines() if starts.exists() else []:
            at, first, rate = line.split()
            runs.append((float(at), int(first), int(rate)))
        return runs


def _run_of(index: int, runs: list[tuple[float, int, int]]) -> tuple[float, int, int]:
    """The run that played frame ``index``: the last to start at or before it (of runs that
    start at one place, the later: the earlier played nothing)."""
    return max((r for r in runs if r[1] <= index), key=lambda r: (r[1], r[0]))
