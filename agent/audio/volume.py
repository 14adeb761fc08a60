"""Volume: software gain with smooth ramps, fades, and the optional ALSA mixer.

Volume levels are linear amplitude factors in 0.0-1.0. A level change never jumps:
:class:`SoftwareGain` walks to the new level at a fixed slope (full scale in
``volume_ramp_ms``), one frame at a time, so there is no zipper noise or click.
When ``audio.mixer`` names an ALSA mixer control, :class:`MixerVolume` sets the
device volume there instead and the software device gain stays at 1.0 (the
per-request volume is always applied in software).

Used on the player thread only.
"""

from __future__ import annotations

import contextlib
from typing import Any

import alsaaudio
import numpy as np

from agent.audio.device import DeviceError

__all__ = ["MixerVolume", "SoftwareGain", "fade_out_curve"]


def fade_out_curve(frames: int) -> np.ndarray:
    """Half-cosine gains from just below 1.0 down to exactly 0.0 over ``frames`` frames."""
    if frames <= 0:
        return np.zeros(0, dtype=np.float32)
    steps = np.arange(1, frames + 1, dtype=np.float64) / frames
    return (0.5 * (1.0 + np.cos(np.pi * steps))).astype(np.float32)


class SoftwareGain:
    """A gain that ramps linearly towards its target as frames are played."""

    def __init__(self, level: float, ramp_s: float) -> None:
        self.level = level
        """The gain of the next frame."""
        self.target = level
        self._ramp_s = ramp_s

    def set(self, target: float) -> None:
        """Move towards ``target`` from the current level, starting with the next frame."""
        self.target = min(1.0, max(0.0, target))
        if self._ramp_s <= 0:
            self.level = self.target

    def advance(self, frames: int, rate: int) -> np.ndarray | float:
        """Gains for the next ``frames`` frames (a float when constant), then step past them."""
        if self.level == self.target or frames <= 0:
            return self.level
        step = 1.0 / max(1.0, self._ramp_s * rate)  # full scale per ramp time
        direction = 1.0 if self.target > self.level else -1.0
        ramp = self.level + direction * step * np.arange(1, frames + 1, dtype=np.float64)
        gains = np.minimum(ramp, self.target) if direction > 0 else np.maximum(ramp, self.target)
        self.level = float(gains[-1])
        return gains.astype(np.float32)


class MixerVolume:
    """Device volume on an ALSA mixer control (player thread)."""

    def __init__(self, control: str, device: str) -> None:
        self.control = control
        self.device = device
        try:
            self._mixer: Any = alsaaudio.Mixer(control=control, device=device)
        except alsaaudio.ALSAAudioError as exc:
            raise DeviceError(f"cannot open ALSA mixer {control!r} on {device!r}: {exc}") from exc

    def set(self, level: float) -> None:
        """Set the playback volume of every channel to ``level`` (0.0-1.0)."""
        try:
            self._mixer.setvolume(round(min(1.0, max(0.0, level)) * 100))
        except alsaaudio.ALSAAudioError as exc:
            raise DeviceError(f"ALSA mixer {self.control!r} failed: {exc}") from exc

    def close(self) -> None:
        """Release the mixer handle."""
        with contextlib.suppress(alsaaudio.ALSAAudioError):
            self._mixer.close()
