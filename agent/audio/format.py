"""Audio values that carry their format.

Every buffer of PCM that moves between the engine, the phrase cache and the
playback worker is an :class:`AudioChunk`, so the sample rate, width and channel
count can never be separated from the bytes they describe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["AudioChunk", "AudioFormat"]


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """Interleaved little-endian signed PCM."""

    rate: int
    """Samples per second per channel (Hz)."""
    width: int = 2
    """Bytes per sample (2 = S16_LE)."""
    channels: int = 1
    """Interleaved channels."""

    def __post_init__(self) -> None:
        if not 1000 <= self.rate <= 384_000:
            raise ValueError(f"sample rate out of range: {self.rate}")
        if self.width not in (2, 4):
            raise ValueError(f"unsupported sample width: {self.width}")
        if not 1 <= self.channels <= 8:
            raise ValueError(f"unsupported channel count: {self.channels}")

    @property
    def frame_bytes(self) -> int:
        """Bytes per frame (one sample for every channel)."""
        return self.width * self.channels

    def seconds(self, nbytes: int) -> float:
        """Duration of ``nbytes`` of audio in this format, in seconds."""
        return nbytes / (self.frame_bytes * self.rate)


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """A piece of PCM audio together with its format."""

    audio: bytes
    """Interleaved PCM frames, ``format.frame_bytes`` bytes each."""
    format: AudioFormat
    """How to interpret :attr:`audio`."""
    text: str = field(default="", compare=False)
    """The text this chunk speaks (a sentence or clause), for logs and events."""
    ends_sentence: bool = field(default=True, compare=False)
    """False for a decoder window that more of the same sentence follows (a streamed first
    sentence, :mod:`agent.voice.streaming`); the player may wait for the rest before it
    plays (:mod:`agent.pipeline.buffering`)."""

    def __post_init__(self) -> None:
        if len(self.audio) % self.format.frame_bytes:
            raise ValueError("audio length is not a whole number of frames")

    @property
    def frames(self) -> int:
        """Number of frames in the chunk."""
        return len(self.audio) // self.format.frame_bytes

    @property
    def seconds(self) -> float:
        """Duration of the chunk in seconds."""
        return self.format.seconds(len(self.audio))

    @classmethod
    def from_float(cls, samples: np.ndarray, rate: int, text: str = "", *,
                   ends_sentence: bool = True) -> AudioChunk:
        """Mono float audio in [-1, 1] to a 16-bit chunk (clipped, not wrapped)."""
        clipped = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
        pcm = (clipped * 32767.0).astype("<i2")
        return cls(pcm.tobytes(), AudioFormat(rate=rate, width=2, channels=1), text,
                   ends_sentence)

    def samples(self) -> np.ndarray:
        """The PCM as an int16 array of shape (frames, channels)."""
        if self.format.width != 2:
            raise ValueError("samples() supports 16-bit audio only")
        return np.frombuffer(self.audio, dtype="<i2").reshape(-1, self.format.channels)
