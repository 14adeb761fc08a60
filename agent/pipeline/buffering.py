"""When playback of a request may start: as audio comes, or a whole sentence at a time.

Streaming plays a sentence's start while the rest is decoded, which only works on a board that
synthesizes faster than real time; on a slower one the worker gathers each sentence whole
(:class:`SentenceGather`). :func:`choose_buffering` decides per voice from ``audio.buffering``
(``auto``: by the voice's warm-up real-time factor, :data:`SLOW_RTF`). Design:
docs/internals.md#when-playback-starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent.audio.format import AudioChunk

if TYPE_CHECKING:
    from agent.voice.voice import Voice

__all__ = ["SLOW_RTF", "Buffering", "BufferingMode", "BufferingSetting", "SentenceGather",
           "choose_buffering"]

BufferingMode = Literal["stream", "sentence"]
BufferingSetting = Literal["auto", "stream", "sentence"]
SLOW_RTF = 1.0
"""Above this real-time factor at the warm-up (compute time over audio time), ``auto`` plays
whole sentences."""


@dataclass(frozen=True, slots=True)
class Buffering:
    """How a voice's audio is handed to the player, and why (for health and logs)."""

    mode: BufferingMode
    reason: str | None = None
    """Why: the warm-up's speed, or the setting; None before any voice is known."""
    voice: str | None = None
    realtime_factor: float | None = None
    """The voice's warm-up compute time over the audio it made (> 1: slower than real time)."""


def warmup_rtf(voice: Voice) -> float | None:
    """The real-time factor the voice's warm-up measured; None when it made no audio."""
    audio_s = float(getattr(voice, "warmup_audio_s", 0.0) or 0.0)
    return voice.warmup_s / audio_s if audio_s > 0 else None


def choose_buffering(voice: Voice, setting: BufferingSetting) -> Buffering:
    """The buffering for ``voice``; ``setting`` ``auto`` follows its warm-up's speed."""
    rtf = warmup_rtf(voice)
    shown = None if rtf is None else round(rtf, 3)
    if setting != "auto":
        return Buffering(setting, f"audio.buffering = {setting!r}", voice.name, shown)
    if rtf is not None and rtf > SLOW_RTF:
        return Buffering("sentence", (
            f"voice {voice.name} synthesized its warm-up at {rtf:.2f}x real time on this board "
            "(slower than it plays): each sentence is synthesized whole before it plays"),
            voice.name, shown)
    return Buffering("stream", None if rtf is None else (
        f"voice {voice.name} synthesized its warm-up at {rtf:.2f}x real time"), voice.name, shown)


class SentenceGather:
    """Collects a streamed sentence's decoder windows until the sentence is complete
    (:attr:`AudioChunk.ends_sentence`), then gives it as one chunk with the same samples.
    The worker feeds it one window per step, so a long sentence is still many short steps."""

    def __init__(self) -> None:
        self._parts: list[AudioChunk] = []

    def add(self, chunk: AudioChunk) -> AudioChunk | None:
        """The whole sentence once ``chunk`` ends it, else None (held)."""
        self._parts.append(chunk)
        return self.flush() if chunk.ends_sentence else None

    def flush(self) -> AudioChunk | None:
        """What is held as one chunk (a producer that ended inside a sentence), or None."""
        parts, self._parts = self._parts, []
        if len(parts) <= 1:
            return parts[0] if parts else None
        fmt = parts[0].format
        if any(p.format != fmt for p in parts):
            raise ValueError("a sentence's chunks changed format")
        return AudioChunk(b"".join(p.audio for p in parts), fmt, parts[0].text)

