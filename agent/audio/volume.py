"""Volume: software gain with smooth ramps, fades, and the optional ALSA mixer.

Volume levels are linear amplitude factors in 0.0-1.0. A level change never jumps:
:class:`SoftwareGain` walks to the new level at a fixed slope (full scale in
``volume_ramp_ms``), one frame at a time, so there is no zipper noise or click.
When ``audio.mixer`` names an ALSA mixer control, :class:`MixerVolume` sets the
device volume there instead and the software device gain stays at 1.0 (the
per-request volume is always applied in software). :class:`PlayerVolume` makes
that choice for the player, and falls back to software gain when the mixer fails.

Used on the player thread only.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import alsaaudio
import numpy as np

from agent.audio.device import DeviceError
from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.audio.stats import VolumeControl
    from agent.settings import AudioSettings

__all__ = ["MixerVolume", "PlayerVolume", "SoftwareGain", "fade_out_curve"]

log = get_logger(__name__)


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


class PlayerVolume:
    """The device volume as the player applies it (player thread).

    :attr:`gain` is the software device gain every written frame goes through: the device
    volume itself, or 1.0 while :class:`MixerVolume` sets it on ``audio.mixer``.
    """

    def __init__(self, settings: AudioSettings) -> None:
        self._settings = settings
        self._ramp_s = settings.volume_ramp_ms / 1000
        self.gain = SoftwareGain(settings.volume, self._ramp_s)
        self.control: VolumeControl = "software"
        self._applied = settings.volume
        self._mixer: MixerVolume | None = None

    def setup(self) -> None:
        """Take over the mixer when one is configured and can be opened."""
        if self._settings.mixer is None:
            return
        try:
            self._mixer = MixerVolume(self._settings.mixer, self._settings.mixer_device)
            self._mixer.set(self._settings.volume)
        except DeviceError as exc:
            log.warning("audio_mixer_unavailable", reason=str(exc))
            self._mixer = None
            return
        self.gain = SoftwareGain(1.0, self._ramp_s)
        self.control = "mixer"

    def apply(self, volume: float) -> None:
        """Move the device volume to ``volume`` (ramped in software); a no-op when it is
        there already. A failing mixer is given up for software gain."""
        if volume == self._applied:
            return
        self._applied = volume
        if self._mixer is not None:
            try:
                self._mixer.set(volume)
                return
            except DeviceError as exc:
                log.warning("audio_mixer_failed", reason=str(exc))
                self._mixer.close()
                self._mixer = None
                self.gain = SoftwareGain(1.0, self._ramp_s)
                self.control = "software"
        self.gain.set(volume)

    def close(self) -> None:
        if self._mixer is not None:
            self._mixer.close()
