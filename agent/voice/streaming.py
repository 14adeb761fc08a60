"""Decode a sentence's latent in windows, so its first part plays while the rest is decoded.

A window decoded with ``pad`` frames of context on each side is the same audio as the whole
sentence decoded at once once ``pad`` covers the decoder's receptive field; :func:`exact_pad`
finds the smallest such ``pad`` by measurement, and a voice with none up to :data:`MAX_PAD` does
not stream. :class:`StreamGain` levels the sentence from the peak seen so far. Design:
docs/internals.md#streaming-the-decoder.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: settings read this module's defaults
    import numpy as np

__all__ = [
    "FIRST_FRAMES",
    "FRAME_SAMPLES",
    "GROWTH",
    "MAX_PAD",
    "MAX_WINDOW_FRAMES",
    "MIN_REFERENCE_PEAK",
    "StreamGain",
    "WindowPlan",
    "auto_growth",
    "exact_pad",
    "peak_normalize",
]

FRAME_SAMPLES = 256
"""The unit of the window settings: a Piper latent frame, 256 samples (11.6 ms at 22.05 kHz).
Windows themselves are counted in frames of the tensor the graph is cut at (see
:mod:`agent.voice.split`), which may be finer."""
FIRST_FRAMES = 40
"""Default first window: 40 frames are 0.46 s of audio at 22.05 kHz."""
GROWTH = 8
"""Largest automatic growth of later windows (see :func:`auto_growth`)."""
MAX_WINDOW_FRAMES = 64
"""Default longest window (0.74 s at 22.05 kHz). It bounds the decoder's working memory, and
costs nothing: on en_US-joe-medium int8, 64-frame windows are as fast as much longer ones or
faster (smaller working sets) and keep the peak RSS lower (``bench/streaming_memory.py``
measures both)."""
MAX_PAD = 64
"""Most latent frames of context searched for on each side of a window."""
MIN_REFERENCE_PEAK = 0.25
"""A window quieter than this does not raise the gain further (a Piper voice's sentences peak
well above it), so a soft first syllable is not blown up to full scale."""
RAMP_S = 0.005
"""Length of the gain ramp when a louder window lowers the gain."""

Decode = Callable[["np.ndarray"], "np.ndarray"]
"""Latent ``[1, C, frames]`` -> mono float audio ``frames * hop`` samples long."""


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """How a sentence's latent is cut into windows."""

    first_frames: int
    """Frames of the first window (what plays first); 0 = decode every sentence whole."""
    growth: int
    """A later window is at most this many times the frames already decoded: it must be
    decoded while those play, so this stays below the board's speed (x real time)."""
    max_window_frames: int
    """Longest window (bounds the decoder's working memory)."""
    pad: int
    """Latent frames of context on each inner side of a window (see :func:`exact_pad`)."""

    def windows(self, frames: int, *, first: bool = True) -> list[tuple[int, int]]:
        """``[start, end)`` frame ranges covering ``frames``: ``first_frames`` (with ``first``),
        then windows growing by ``growth``, none longer than ``max_window_frames``; one window
        when the sentence is too short for a cut to pay."""
        if not first or self.first_frames <= 0 or frames < self.first_frames + 2 * self.pad:
            cuts = [0]
        else:
            cuts = [0, self.first_frames]
        while frames - cuts[-1] > 0:
            longest = max(self.max_window_frames, 1)
            if len(cuts) > 1:
                longest = min(longest, self.growth * cuts[-1])
            remaining = frames - cuts[-1]
            if remaining <= longest + self.pad:  # a short tail rides with the window before it
                cuts.append(frames)
            else:
                cuts.append(cuts[-1] + longest)
        return list(itertools.pairwise(cuts))

    def decode(self, decode: Decode, latent: np.ndarray, start: int, end: int,
               hop: int) -> np.ndarray:
        """Audio of frames ``[start, end)`` of ``latent``, decoded with ``pad`` frames of
        context."""
        total = latent.shape[-1]
        lo, hi = max(0, start - self.pad), min(total, end + self.pad)
        audio = decode(latent[..., lo:hi])
        return audio[(start - lo) * hop:(end - lo) * hop]


def exact_pad(decode: Decode, frame_shape: tuple[int, ...], hop: int, max_pad: int = MAX_PAD,
              *, seed: int = 0) -> int | None:
    """The smallest ``pad`` (1..``max_pad``) for which windowed decoding of a random latent
    equals decoding it whole (to 1e-5 of its peak), or None when none does.

    Exactness only grows with ``pad`` (more context never hurts a local decoder), so the
    search doubles ``pad`` until it is exact, then halves the interval: about 2 log2(pad)
    probes.
    """
    def exact(pad: int) -> bool | None:
        return _windowed_equals_whole(decode, frame_shape, hop, pad, seed)

    low, high = 0, 1  # not exact at low (0 = no context), exact at high once found
    while True:
        verdict = exact(high)
        if verdict is None:
            return None
        if verdict:
            break
        if high >= max_pad:
            return None
        low, high = high, min(2 * high, max_pad)
    while high - low > 1:
        middle = (low + high) // 2
        if exact(middle):
            high = middle
        else:
            low = middle
    return high


def _windowed_equals_whole(decode: Decode, frame_shape: tuple[int, ...], hop: int, pad: int,
                           seed: int) -> bool | None:
    """Whether two windows cut with ``pad`` frames of context give the whole decoding; None
    when the decoder does not give ``hop`` samples per frame."""
    import numpy as np

    frames = 4 * pad + 8
    latent = np.random.default_rng(seed).standard_normal((*frame_shape, frames))
    latent = latent.astype(np.float32)
    whole = decode(latent)
    if whole.size != frames * hop:
        return None
    plan = WindowPlan(first_frames=frames // 2, growth=1, max_window_frames=frames, pad=pad)
    joined = np.concatenate([plan.decode(decode, latent, a, b, hop)
                             for a, b in plan.windows(frames)])
    scale = max(float(np.max(np.abs(whole))), 1e-6)
    return joined.size == whole.size and float(np.max(np.abs(joined - whole))) <= 1e-5 * scale


def auto_growth(compute_s: float, audio_s: float) -> int:
    """Window growth for a voice that synthesized ``audio_s`` of audio in ``compute_s``.

    A window of ``g`` times the audio decoded so far takes ``g * rtf`` times that audio's
    duration to decode, and must be ready before that audio has played: ``g = 0.5 / rtf`` keeps
    a 2x margin (16 on a board 32x faster than real time, capped at :data:`GROWTH`; 1 on a
    board barely 2x faster).
    """
    if audio_s <= 0 or compute_s <= 0:
        return 1
    return max(1, min(GROWTH, int(0.5 * audio_s / compute_s)))


def peak_normalize(audio: np.ndarray) -> np.ndarray:
    """A whole sentence scaled to its peak, as Piper does (silence stays silence)."""
    import numpy as np

    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    return audio / peak if peak > 1e-8 else np.zeros_like(audio)


class StreamGain:
    """Peak normalisation for a sentence that is played before it is finished (one per sentence)."""

    def __init__(self, sample_rate: int) -> None:
        self._peak = 0.0
        self._ramp = max(1, int(RAMP_S * sample_rate))

    def apply(self, audio: np.ndarray) -> np.ndarray:
        """``audio`` (the sentence's next window) scaled to the peak so far, in [-1, 1]."""
        import numpy as np

        peak = float(np.max(np.abs(audio))) if audio.size else 0.0
        before = self._peak
        if peak <= before:
            return audio / before if before > 0 else audio
        self._peak = max(peak, MIN_REFERENCE_PEAK)
        gain = np.full(audio.size, 1.0 / self._peak, dtype=np.float32)
        if before > 0:
            # Lower the gain from the old to the new value before the first sample that the old
            # gain would push past full scale (at most RAMP_S), so nothing clips or clicks.
            over = int(np.argmax(np.abs(audio) > before))
            ramp = min(self._ramp, over)
            if ramp:
                gain[:ramp] = np.linspace(1.0 / before, 1.0 / self._peak, ramp, dtype=np.float32)
        return np.clip(audio * gain, -1.0, 1.0)
