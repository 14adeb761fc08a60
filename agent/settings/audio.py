"""The ``[audio]`` section: the ALSA output, and :func:`effective_audio`, the one place it is
merged with the hardware profile (docs/hardware-profiles.md, "Audio and thermal")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from agent.settings.base import Section

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile

__all__ = ["AudioSettings", "effective_audio"]


class AudioSettings(Section):
    """ALSA output (read by :mod:`agent.audio`). Unset period/buffer sizes come from the
    hardware profile (:func:`effective_audio`), else about 20 ms periods, 4 per buffer."""

    device: str = Field(
        default="default", min_length=1, max_length=512, description="ALSA PCM name."
    )
    mixer: str | None = Field(
        default=None, max_length=128,
        description="ALSA mixer control for device volume; unset = software volume.",
    )
    volume: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Device volume 0.0-1.0 at start. A volume command's volume is kept across "
                    "restarts while this stays unchanged (operations.md#the-device-volume).")
    period_frames: int | None = Field(
        default=None, ge=64, le=65536,
        description="ALSA period size in frames; unset lets the hardware profile choose.",
    )
    buffer_periods: int | None = Field(
        default=None, ge=2, le=64,
        description="ALSA buffer size in periods; unset lets the hardware profile choose.",
    )
    lead_in_ms: int = Field(
        default=0, ge=0, le=2000, description="Silence written before each utterance (ms)."
    )
    keep_open_s: float = Field(
        default=5.0, ge=0.0, le=3600.0,
        description="Keep the device open this long after the last utterance (s).",
    )
    fade_ms: int = Field(default=15, ge=0, le=500, description="Fade length on interrupt (ms).")
    queue_max: int = Field(default=32, ge=1, le=10_000, description="Longest play queue.")
    reopen_interval_s: float = Field(
        default=2.0, ge=0.05, le=600.0,
        description="How often a lost audio device is retried (s).",
    )
    mixer_device: str = Field(
        default="default", min_length=1, max_length=128,
        description="ALSA control device holding the mixer control (e.g. hw:1).",
    )
    rate: int | None = Field(
        default=None, ge=8000, le=384_000,
        description="Sample rate to run the device at (Hz), resampling in software; "
        "unset = the voice's rate, or the nearest rate the device takes.",
    )
    channels: int | None = Field(
        default=None, ge=1, le=8,
        description="Channels to open the device with (mono is copied to all); "
        "unset = the voice's channel count, or what the device takes.",
    )
    volume_ramp_ms: int = Field(
        default=50, ge=0, le=2000,
        description="Time a software volume change takes to reach its new level (ms).",
    )
    producer_timeout_s: float = Field(
        default=60.0, ge=1.0, le=3600.0,
        description="An utterance that waits this long for its next audio chunk fails (s).",
    )
    item_buffer_s: float = Field(
        default=30.0, ge=1.0, le=3600.0,
        description="Synthesized audio one request may hold ahead of playback (s); "
        "the producer waits when it is full.",
    )
    buffering: Literal["auto", "stream", "sentence"] = Field(
        default="auto",
        description="When a sentence starts playing. `stream`: as soon as its first audio is "
        "there (a streamed first sentence plays while the rest is decoded); `sentence`: once "
        "it is synthesized whole (speech starts later and pauses between sentences, never "
        "inside one); `auto`: `sentence` for a voice whose warm-up ran slower than real time "
        "on this board, else `stream`. Health: `audio.buffering` and its reason.",
    )
    output_latency_ms: float = Field(
        default=0.0, ge=0.0, le=2000.0,
        description="Latency after ALSA's own buffer (ms): a USB or Bluetooth speaker's buffer, "
        "an amplifier's DSP. A synchronized start (docs/fleet.md#synchronized-group-speech) "
        "places the first sample this much earlier; measure it once per kind of speaker.",
    )
    sync_late: Literal["join", "skip"] = Field(
        default="join",
        description="A device that cannot make a synchronized start's time: `join` plays "
        "from the sample due now (what it missed is skipped), `skip` does not play it "
        "(final `expired`). Neither starts the announcement from the beginning late.",
    )
    device_timeout_s: float = Field(
        default=5.0, ge=0.1, le=600.0,
        description="Longest wait for one ALSA call (s; writes, stops and closes also get "
        "the buffer's length). The PCM runs in a helper process: an open that takes longer "
        "fails (the device is degraded) and is collected when it completes; any other call "
        "that takes longer fails and the helper is replaced. Keep it below `health.stall_s`.",
    )


def effective_audio(audio: AudioSettings, profile: EffectiveProfile | None) -> AudioSettings:
    """The audio settings the player runs with: ``audio`` with the hardware profile applied.

    The one place the ``[audio]`` settings meet the profile: the daemon, ``tts-agent say`` and
    ``check-config`` call it once and use its result (the health report then names the PCM
    the player opens). ``profile`` is what :func:`agent.hardware.effective.resolve_profile`
    resolved, whose ``audio`` (``alsa_device``, ``period_frames``, ``buffer_periods``,
    ``queue_max``) already lets explicit settings win and records where each value came from
    (``origins``); None (no profile) leaves ``audio`` as it is.
    """
    if profile is None:
        return audio
    board = profile.audio
    return audio.model_copy(update={
        "device": board.alsa_device,
        "period_frames": board.period_frames,
        "buffer_periods": board.buffer_periods,
        "queue_max": board.queue_max,
    })
