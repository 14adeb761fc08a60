"""Turn voice audio into the frames the opened device takes.

A voice produces 16-bit mono at its own rate (Piper: 22.05 kHz); devices often take
only 44.1/48 kHz stereo, sometimes only 24/32-bit samples. :class:`StreamConverter`
maps channels, resamples with a band-limited (windowed-sinc) filter that keeps its
state across chunks, so sentence boundaries join without a seam and the output
length is exact, and :func:`encode` quantizes float frames to the device's sample
format. Everything here is pure numpy and runs on the player thread.

Float frames are ``float32`` arrays of shape ``(frames, channels)`` in [-1, 1).
"""

from __future__ import annotations

import math

import numpy as np

from agent.audio.format import AudioChunk, AudioFormat

__all__ = [
    "SUPPORTED_SAMPLE_FORMATS",
    "Resampler",
    "StreamConverter",
    "decode",
    "encode",
    "map_channels",
]

SUPPORTED_SAMPLE_FORMATS: dict[str, int] = {
    "S16_LE": 2,
    "S32_LE": 4,
    "S24_LE": 4,
    "S24_3LE": 3,
    "FLOAT_LE": 4,
}
"""ALSA sample formats :func:`encode` writes, with their bytes per sample."""

Frames = np.ndarray
"""float32 audio of shape (frames, channels) in [-1, 1)."""


def decode(chunk: AudioChunk) -> Frames:
    """The chunk's PCM as float frames (16- or 32-bit signed little-endian input)."""
    fmt = chunk.format
    dtype, scale = ("<i2", 32768.0) if fmt.width == 2 else ("<i4", 2147483648.0)
    ints = np.frombuffer(chunk.audio, dtype=dtype).reshape(-1, fmt.channels)
    if fmt.width == 2:
        return ints.astype(np.float32) / np.float32(scale)
    return (ints.astype(np.float64) / scale).astype(np.float32)


def encode(frames: Frames, sample_format: str) -> bytes:
    """Quantize float frames to interleaved ``sample_format`` bytes (rounded and clipped)."""
    if sample_format == "FLOAT_LE":
        return bytes(np.clip(frames, -1.0, 1.0).astype("<f4").tobytes())
    if sample_format == "S16_LE":
        scaled = np.rint(frames * np.float32(32768.0))
        return np.clip(scaled, -32768, 32767).astype("<i2").tobytes()
    if sample_format == "S32_LE":
        wide = np.rint(frames.astype(np.float64) * 2147483648.0)
        return np.clip(wide, -2147483648, 2147483647).astype("<i4").tobytes()
    if sample_format in ("S24_LE", "S24_3LE"):
        wide = np.clip(np.rint(frames.astype(np.float64) * 8388608.0), -8388608, 8388607)
        ints = wide.astype("<i4")
        if sample_format == "S24_LE":
            return ints.tobytes()
        return ints.reshape(-1, 1).view(np.uint8)[:, :3].tobytes()
    raise ValueError(f"unsupported sample format {sample_format}")


def map_channels(frames: Frames, channels: int) -> Frames:
    """Copy mono to every channel, or mix several channels down to mono."""
    have = frames.shape[1]
    if have == channels:
        return frames
    if have == 1:
        return np.repeat(frames, channels, axis=1)
    if channels == 1:
        mixed: Frames = frames.mean(axis=1, keepdims=True, dtype=np.float32)
        return mixed
    raise ValueError(f"cannot map {have} channels to {channels}")


class Resampler:
    """Streaming band-limited resampler between two fixed rates.

    Each output frame ``n`` sits at input position ``n * src / dst``; it is the dot
    product of the neighbouring input frames with a Kaiser-windowed sinc whose cutoff
    is just below the lower of the two Nyquist frequencies. The kernel is tabulated
    for up to :attr:`PHASES` fractional positions. Input arrives in pieces through
    :meth:`push`; :meth:`flush` ends the stream so that exactly
    ``round(frames_in * dst / src)`` frames come out in total.
    """

    ZERO_CROSSINGS = 16
    """Sinc lobes on each side of the centre tap (filter length and steepness)."""
    PHASES = 4096
    """Most fractional positions the kernel is tabulated for."""
    BETA = 8.6
    """Kaiser window shape (about 90 dB stop-band)."""
    BLOCK = 4096
    """Output frames computed per vectorised step (bounds the scratch memory)."""

    def __init__(self, src_rate: int, dst_rate: int, channels: int) -> None:
        if src_rate <= 0 or dst_rate <= 0:
            raise ValueError("sample rates must be positive")
        common = math.gcd(src_rate, dst_rate)
        self._up = dst_rate // common
        self._down = src_rate // common
        self._channels = channels
        cutoff = min(1.0, dst_rate / src_rate) * 0.94  # fraction of the source Nyquist
        self._half = math.ceil(self.ZERO_CROSSINGS / cutoff)
        self._phases = min(self._up, self.PHASES)
        self._table = self._kernel_table(cutoff)
        self._reset()

    def _reset(self) -> None:
        self._hist = np.zeros((self._half - 1, self._channels), dtype=np.float32)
        self._hist_start = -(self._half - 1)  # input index of self._hist[0]
        self._next_out = 0
        self._in_total = 0

    def _kernel_table(self, cutoff: float) -> np.ndarray:
        taps = 2 * self._half
        frac = np.arange(self._phases, dtype=np.float64)[:, None] / self._phases
        dist = np.arange(taps, dtype=np.float64)[None, :] - (self._half - 1) - frac
        window = np.i0(self.BETA * np.sqrt(np.clip(1.0 - (dist / self._half) ** 2, 0.0, 1.0)))
        kernel = cutoff * np.sinc(cutoff * dist) * window / np.i0(self.BETA)
        kernel /= kernel.sum(axis=1, keepdims=True)  # unity gain at DC for every phase
        return kernel.astype(np.float32)

    def push(self, frames: Frames) -> Frames:
        """Add input frames; return every output frame that can now be computed."""
        if len(frames):
            self._hist = np.concatenate([self._hist, frames.astype(np.float32, copy=False)])
            self._in_total += len(frames)
        # Output n needs input up to base(n) + half, where base may round up by one.
        last_base = self._in_total - 2 - self._half
        end = (last_base * self._up + self._up - 1) // self._down + 1
        return self._compute(max(end, self._next_out))

    def flush(self) -> Frames:
        """End the stream: return the remaining output frames and start afresh."""
        expected = (self._in_total * self._up + self._down // 2) // self._down
        pad = np.zeros((self._half + 2, self._channels), dtype=np.float32)
        self._hist = np.concatenate([self._hist, pad])
        out = self._compute(max(expected, self._next_out))
        self._reset()
        return out

    def _compute(self, end: int) -> Frames:
        pieces = []
        offsets = np.arange(2 * self._half)
        for start in range(self._next_out, end, self.BLOCK):
            ns = np.arange(start, min(end, start + self.BLOCK), dtype=np.int64)
            pos = ns * self._down
            base = pos // self._up
            phase = np.rint((pos % self._up) * (self._phases / self._up)).astype(np.int64)
            carry = phase == self._phases
            base += carry
            phase[carry] = 0
            idx = (base - (self._half - 1) - self._hist_start)[:, None] + offsets[None, :]
            gathered = self._hist[idx]  # (n, taps, channels)
            pieces.append(np.einsum("nt,ntc->nc", self._table[phase], gathered))
        self._next_out = max(self._next_out, end)
        keep_from = (self._next_out * self._down) // self._up - self._half
        drop = keep_from - self._hist_start
        if drop > 0:
            self._hist = self._hist[drop:]
            self._hist_start = keep_from
        if not pieces:
            return np.zeros((0, self._channels), dtype=np.float32)
        return np.concatenate(pieces).astype(np.float32, copy=False)


class StreamConverter:
    """Source chunks of one utterance to float frames at the device rate and channel count.

    Chunks may change format mid-stream (the resampler is flushed and rebuilt).
    Call :meth:`flush` after the last chunk to get the resampler's tail.
    """

    def __init__(self, rate: int, channels: int) -> None:
        self.rate = rate
        self.channels = channels
        self._source: AudioFormat | None = None
        self._resampler: Resampler | None = None

    def push(self, chunk: AudioChunk) -> Frames:
        """Convert one chunk; returns the frames ready so far (may be fewer than given)."""
        out: list[Frames] = []
        if chunk.format != self._source:
            out.append(self.flush())
            self._source = chunk.format
            work_channels = min(chunk.format.channels, self.channels)
            if chunk.format.rate != self.rate:
                self._resampler = Resampler(chunk.format.rate, self.rate, work_channels)
        frames = decode(chunk)
        if frames.shape[1] > self.channels:
            frames = map_channels(frames, self.channels)
        if self._resampler is not None:
            frames = self._resampler.push(frames)
        out.append(map_channels(frames, self.channels))
        return np.concatenate(out) if len(out) > 1 else out[0]

    def flush(self) -> Frames:
        """The frames still inside the resampler (none when the rates match)."""
        empty = np.zeros((0, self.channels), dtype=np.float32)
        if self._resampler is None:
            return empty
        tail = map_channels(self._resampler.flush(), self.channels)
        self._resampler = None
        self._source = None
        return tail
