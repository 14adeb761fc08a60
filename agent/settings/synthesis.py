"""The ``[synthesis]`` section: threads, providers, streaming windows, tuning."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.hardware.runtime import Provider
from agent.settings.base import Section
from agent.settings.paths import AbsPath
from agent.text.limits import DEFAULT_MAX_TEXT_CHARS, HARD_MAX_TEXT_CHARS
from agent.voice import streaming


class SynthesisSettings(Section):
    max_text_chars: int = Field(
        default=DEFAULT_MAX_TEXT_CHARS, ge=1, le=HARD_MAX_TEXT_CHARS,
        description="Longest text accepted per request.",
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

