"""Generate the chimes that ship with the agent: ``ding.wav`` and ``alert.wav`` (docs/chimes.md).

    python chimes/make_chimes.py [DIR]     # default: the directory of this script

Both are synthesized here with numpy, nothing is downloaded: bell-like tones (a few inharmonic
partials, each decaying exponentially), 16-bit mono at 44.1 kHz (the player resamples them to
the device, as it would any chime), peaking at -6 dBFS so they sit under the speech that
follows. Each starts with a 5 ms fade-in and ends with a 40 ms fade-out to exact zero, so
neither clicks. ``./build.sh`` runs this script (the WAVs are build output, not in git);
``./build.sh install`` copies them to ``/var/lib/tts-agent/chimes``. The same numpy gives the
same bytes on every run.
"""

from __future__ import annotations

import sys
import wave
from pathlib import Path

import numpy as np

RATE = 44100
PEAK = 0.5
"""-6 dBFS."""
FADE_IN_S = 0.005
FADE_OUT_S = 0.040
PARTIALS = ((1.0, 1.0, 1.0), (2.0, 0.5, 1.6), (2.76, 0.25, 2.2), (5.4, 0.08, 3.5))
"""(frequency ratio, amplitude, decay speed-up) of a small bell's partials."""


def bell(freq: float, seconds: float, decay_s: float) -> np.ndarray:
    """One struck bell tone at ``freq`` Hz lasting ``seconds`` (float64, unnormalised)."""
    t = np.arange(round(seconds * RATE)) / RATE
    tone = np.zeros_like(t)
    for ratio, amp, speed in PARTIALS:
        if freq * ratio < RATE / 2 * 0.9:
            tone += amp * np.sin(2 * np.pi * freq * ratio * t) * np.exp(-t * speed / decay_s)
    return tone


def sequence(notes: list[tuple[float, float]], seconds: float, decay_s: float) -> np.ndarray:
    """Bell notes ``(start_s, freq)`` mixed into ``seconds`` of audio."""
    out = np.zeros(round(seconds * RATE))
    for start, freq in notes:
        at = round(start * RATE)
        tone = bell(freq, seconds - start, decay_s)
        out[at:at + len(tone)] += tone
    return out


def finish(audio: np.ndarray) -> bytes:
    """Faded in and out, scaled to :data:`PEAK`, as 16-bit little-endian PCM."""
    audio = audio * (PEAK / np.max(np.abs(audio)))
    fade_in, fade_out = round(FADE_IN_S * RATE), round(FADE_OUT_S * RATE)
    audio[:fade_in] *= np.sin(np.linspace(0, np.pi / 2, fade_in)) ** 2
    audio[-fade_out:] *= np.cos(np.linspace(0, np.pi / 2, fade_out)) ** 2
    audio[-1] = 0.0
    return bytes(np.rint(audio * 32767).astype("<i2").tobytes())


CHIMES = {
    # two notes, a major sixth down (the "ding-dong" of a public-address system)
    "ding": lambda: sequence([(0.0, 987.77), (0.32, 783.99)], 1.4, 0.45),
    # three quick rising notes (C6 E6 G6), for urgent announcements
    "alert": lambda: sequence([(0.0, 1046.5), (0.16, 1318.5), (0.32, 1568.0)], 1.1, 0.3),
}


def write(directory: Path) -> list[Path]:
    """Write every chime into ``directory``; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in CHIMES.items():
        path = directory / f"{name}.wav"
        tmp = path.with_name(f".{name}.wav.tmp")
        with wave.open(str(tmp), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(RATE)
            wav.writeframes(finish(make()))
        tmp.replace(path)  # a running agent never reads a half-written chime
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for path in write(target):
        print(path)
