"""The sections of the deployment settings: one frozen model per TOML table (``[models]``,
``[synthesis]``, ``[text]``, ``[cache]``, ``[audio]``, ``[mqtt]``, ``[health]``, ``[log]``).

:class:`agent.settings.Settings` holds one of each and re-exports them; import them from
there. Every field has a description (``docs/configuration.md`` is generated from them) and
its bounds; unknown keys are errors. ``[mqtt]`` and ``[mqtt.journal]`` are in
:mod:`agent.settings_mqtt` (re-exported here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent.hardware.runtime import Provider
from agent.settings_mqtt import JournalSettings, MqttSettings
from agent.settings_paths import AbsPath, PromPath, default_cache_dir, default_model_dir
from agent.voice import streaming

if TYPE_CHECKING:
    from agent.hardware.profiles import AudioProfile

__all__ = [
    "NAME_PATTERN",
    "AudioSettings",
    "CacheSettings",
    "HealthSettings",
    "JournalSettings",
    "LogSettings",
    "ModelSettings",
    "MqttSettings",
    "SynthesisSettings",
    "TextSettings",
]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""Device ids, voice and profile names: one topic level, no wildcards, no path separators."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSettings(_Section):
    dir: AbsPath = Field(
        default_factory=default_model_dir,
        description="Directory holding voice bundles (models/<voice>/ or models/<voice>/current/).",
    )
    default_voice: str = Field(
        default="en_US-joe-medium",
        pattern=NAME_PATTERN,
        description="Voice used when a request names none.",
    )
    variant: Literal["auto", "fp32", "int8"] = Field(
        default="auto",
        description="Model variant to load; auto lets the hardware profile choose.",
    )
    watch: bool = Field(default=True, description="Hot-reload voices when their files change.")
    watch_polling: bool = Field(
        default=False,
        description="Use the polling observer (filesystems without inotify).",
    )
    debounce_s: float = Field(
        default=1.0, ge=0.0, le=60.0,
        description="Quiet time after the last file event before a reload is attempted (s).",
    )
    pending_timeout_s: float = Field(
        default=60.0, ge=0.0, le=3600.0,
        description="How long a bundle may look half-written (sizes not matching its manifest) "
        "before it is validated anyway and rejected (s).",
    )
    max_model_bytes: int = Field(  # = agent.voice.bundle.DEFAULT_MAX_FILE_BYTES
        default=256 << 20, ge=1 << 20, le=4 << 30, description="Largest file a voice bundle may "
        "have (bytes), refused before it is read; keep it well under the unit's MemoryMax "
        "(onnxruntime holds a model more than once).")
    trusted_keys: tuple[AbsPath, ...] = Field(default=(), description="ed25519 public keys (PEM).")
    require_signature: bool = Field(default=False, description="Refuse unsigned voices.")
    requantize_stale: bool = Field(default=False, description=(
        "Rebuild a stale int8 variant (its fp32 source changed) in the background with tts-agent "
        "quantize at the lowest CPU priority; fp32 serves meanwhile. Only on boards that can "
        "afford it: it runs in the service's cgroup (MemoryMax)."))
    @model_validator(mode="after")
    def _trust_usable(self) -> ModelSettings:  # reads the key files, if any are set
        if self.trusted_keys or self.require_signature:
            from agent.voice.signature import check_trust_settings
            check_trust_settings(self)
        return self


class SynthesisSettings(_Section):
    max_text_chars: int = Field(
        default=5000, ge=1, le=100_000, description="Longest text accepted per request."
    )
    phoneme_cache_size: int = Field(
        default=1024, ge=0, le=1_000_000, description="Entries in the phonemization LRU cache."
    )
    sentence_silence_s: float = Field(
        default=0.0, ge=0.0, le=5.0, description="Silence added after each sentence (s)."
    )
    max_clause_phonemes: int = Field(
        default=60, ge=0, le=10_000,
        description="Cut a long sentence after a clause (at , ; : or a dash) once it holds this "
        "many phonemes, so speech starts before the whole sentence is synthesized; 0 = off.",
    )
    stream_first_frames: int = Field(
        default=streaming.FIRST_FRAMES, ge=0, le=10_000,
        description="Stream a request's first sentence: its first this many frames of 256 "
        "samples (11.6 ms each at 22.05 kHz) play while the rest is decoded; the audio is the "
        "same as decoding it whole. 0 = off (each sentence is decoded whole).",
    )
    stream_growth: int | None = Field(
        default=None, ge=1, le=1000,
        description="A later window of a streamed sentence is at most this many times the frames "
        "already decoded, so it is decoded before the audio before it has played. Unset: half "
        f"the speed the voice showed at its warm-up (x real time), at most {streaming.GROWTH}.",
    )
    stream_max_window_frames: int = Field(
        default=streaming.MAX_WINDOW_FRAMES, ge=16, le=100_000,
        description="Longest window of a streamed sentence, in frames of 256 samples (bounds "
        "the decoder's memory).",
    )
    intra_op_threads: int | None = Field(
        default=None, ge=1, le=256,
        description="onnxruntime intra-op threads; unset lets the hardware profile choose.",
    )
    inter_op_threads: int | None = Field(
        default=None, ge=1, le=256,
        description="onnxruntime inter-op threads; unset lets the hardware profile choose.",
    )
    execution_mode: Literal["sequential", "parallel"] | None = Field(
        default=None,
        description="onnxruntime execution mode; unset lets the hardware profile choose.",
    )
    graph_optimization: Literal["disable", "basic", "extended", "all"] | None = Field(
        default=None,
        description="onnxruntime graph optimisation level; unset lets the hardware profile choose.",
    )
    thread_affinity: Literal["none", "big_cores"] | None = Field(
        default=None,
        description="Pin onnxruntime threads to the big cores; unset lets the hardware profile "
                    "choose.",
    )
    allow_spinning: bool | None = Field(
        default=None,
        description="Let idle onnxruntime threads spin; unset lets the hardware profile choose.",
    )
    providers: list[Provider] | None = Field(
        default=None, min_length=1, max_length=3,
        description="Execution providers in order of preference; when set, the first one is "
                    "required (no fallback). Unset lets the hardware profile choose.",
    )
    profiles_dir: AbsPath | None = Field(
        default=None,
        description="Extra directory of hardware profile files; a file there replaces the "
                    "shipped profile of the same name.",
    )
    tune_file: AbsPath | None = Field(
        default=None,
        description="Where `tts-agent tune` stores the measured best thread setting, which then "
                    "overrides the profile; default <cache.dir>/tune.json.",
    )


class TextSettings(_Section):
    """How request text is read before espeak-ng phonemizes it (see docs/text.md)."""

    normalize: bool = Field(
        default=True,
        description="Put numbers, money, times, dates, units, codes, abbreviations and symbols "
        "in words before phonemizing (English voices; espeak-ng reads other languages itself). "
        "Off: the text goes to espeak-ng as written.",
    )
    date_order: Literal["mdy", "dmy", "ymd"] = Field(
        default="mdy",
        description="How a numeric date such as 3/12 or 03/12/2026 is read: mdy (March 12), "
        "dmy (3 December) or ymd; ISO dates (2026-12-03) are always year-month-day.",
    )
    symbols: Literal["drop", "espeak"] = Field(
        default="drop",
        description="Emoji and other symbols without a reading: drop them (text of nothing "
        "but such symbols is refused as having nothing to speak), or leave them for espeak-ng, "
        "which names them (\"party popper\").",
    )
    lexicon: AbsPath | None = Field(
        default=None,
        description="The device lexicon: a TOML file of words and how to say them (a "
        "respelling or IPA), validated at load and reloaded when it changes (docs/text.md, "
        "Lexicon); unset = none.",
    )


class CacheSettings(_Section):
    dir: AbsPath = Field(
        default_factory=default_cache_dir,
        description="Directory for the phrase cache and optimised-model cache.",
    )
    max_mb: int = Field(default=256, ge=0, le=1_000_000,
                        description="Phrase cache size limit (MiB).")
    warm_phrases: list[str] = Field(
        default_factory=list, max_length=1000,
        description="Phrases pre-synthesized after each model load.",
    )


class AudioSettings(_Section):
    """ALSA output (read by :mod:`agent.audio`). Unset period/buffer sizes come from the
    hardware profile (:meth:`with_profile`), else about 20 ms periods, 4 per buffer."""

    device: str = Field(
        default="default", min_length=1, max_length=512, description="ALSA PCM name."
    )
    mixer: str | None = Field(
        default=None, max_length=128,
        description="ALSA mixer control for device volume; unset = software volume.",
    )
    volume: float = Field(default=1.0, ge=0.0, le=1.0, description="Device volume 0.0-1.0.")
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
    device_timeout_s: float = Field(
        default=5.0, ge=0.1, le=600.0,
        description="Longest wait for one ALSA call (s; writes, stops and closes also get "
        "the buffer's length). The PCM runs in a helper process: an open that takes longer "
        "fails (the device is degraded) and is collected when it completes; any other call "
        "that takes longer fails and the helper is replaced. Keep it below `health.stall_s`.",
    )

    def with_profile(self, profile: AudioProfile) -> AudioSettings:
        """These settings with a hardware profile's ``[audio]`` section applied.

        ``profile`` is ``EffectiveProfile.audio`` (``alsa_device``, ``period_frames``,
        ``buffer_periods``, ``queue_max``), which already lets explicit settings win.
        """
        return self.model_copy(update={
            "device": profile.alsa_device,
            "period_frames": profile.period_frames,
            "buffer_periods": profile.buffer_periods,
            "queue_max": profile.queue_max,
        })


class HealthSettings(_Section):
    interval_s: float = Field(
        default=30.0, ge=1.0, le=86_400.0, description="Health publish interval (s)."
    )
    stall_s: float = Field(
        default=30.0, ge=1.0, le=3600.0,
        description="A worker busy on one item longer than this counts as hung (s).",
    )
    state_check_s: float = Field(
        default=5.0, ge=0.5, le=3600.0,
        description="How often the overall state is re-evaluated; a change of state is "
                    "published at once, not at the next interval (s).",
    )
    window: int = Field(
        default=200, ge=10, le=100_000,
        description="Most recent requests the latency, RTF and first-audio percentiles cover.",
    )
    failure_ratio: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="Share of failed requests in the window (at least 5 requests) at which the "
                    "device counts as degraded; 0 switches the rule off.",
    )
    thermal_limit_c: float | None = Field(
        default=None, ge=30.0, le=150.0,
        description="CPU temperature at or above which the device counts as degraded (deg C); "
                    "unset = the hardware profile's thermal limit (85 without a profile).",
    )
    disk_min_free_mb: int = Field(
        default=100, ge=0, le=10_000_000,
        description="Free space on the cache filesystem below which the device counts as "
                    "degraded (MiB); 0 switches the rule off.",
    )
    prometheus_file: PromPath | None = Field(
        default=None,
        description="Write the health figures in Prometheus text format to this file (for "
                    "node_exporter's textfile collector, e.g. "
                    "/var/lib/prometheus/node-exporter/tts_agent.prom); unset = off.",
    )


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level logged.")
    format: Literal["auto", "json", "console"] = Field(
        default="auto", description="auto: console on a TTY, JSON lines otherwise.")
