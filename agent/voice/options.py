"""How a voice is loaded and how it speaks: one frozen :class:`VoiceOptions` per library.

:meth:`agent.voice.voice.Voice.load` takes it whole. The voice never reads settings: the library
builds the options from the deployment settings and the hardware profile
(:func:`agent.library.options.voice_options`); benchmarks and tests build them directly. The
defaults are safe anywhere (fp32, one onnxruntime thread on the CPU, streaming on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent.hardware.runtime import RuntimeOptions
from agent.text.frontend import TextLexicon
from agent.text.limits import DEFAULT_MAX_TEXT_CHARS
from agent.voice import streaming
from agent.voice.bundle import DEFAULT_MAX_FILE_BYTES

__all__ = ["TextLexicon", "TextOptions", "VoiceOptions"]


@dataclass(frozen=True, slots=True)
class TextOptions:
    """How a voice reads text before espeak-ng (the ``[text]`` settings; docs/text.md)."""

    normalize: bool = True
    """Numbers, money, dates, abbreviations... in words (voices of a language that has a
    normalizer, English, German, French, Spanish:
    :meth:`agent.text.normalize.Normalizer.for_language`)."""
    date_order: Literal["mdy", "dmy", "ymd"] = "mdy"
    """How the normalizer reads a numeric date such as 3/12."""
    drop_symbols: bool = True
    """Drop emoji and symbols without a reading (False: espeak-ng names them)."""
    lexicon: TextLexicon | None = None
    """The device lexicon, shared by every voice (swapped in place when its file changes)."""


@dataclass(frozen=True, slots=True)
class VoiceOptions:
    """Everything :meth:`~agent.voice.voice.Voice.load` needs besides the bundle."""

    variant: str = "fp32"
    """Which of the bundle's models to load (``fp32``, ``int8``)."""
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)
    max_model_bytes: int = DEFAULT_MAX_FILE_BYTES
    """Largest bundle file (model) that is read; a larger one is refused before it is read."""
    """onnxruntime threads, pinning, providers and the optimised-model cache."""
    max_chars: int = DEFAULT_MAX_TEXT_CHARS
    """Longest text one request may have (characters)."""
    text: TextOptions = field(default_factory=TextOptions)
    """The text stages before espeak-ng: normalizer, lexicon, symbols."""
    phoneme_cache_size: int = 1024
    """Phonemized sentences kept per voice (0 = no cache)."""
    sentence_silence_s: float = 0.0
    """Silence appended after every sentence (s)."""
    max_clause_phonemes: int = 0
    """A long sentence is cut after a clause once it holds this many phonemes (0 = never)."""
    stream_first_frames: int = streaming.FIRST_FRAMES
    """First window of a request's first sentence, in frames of
    :data:`~agent.voice.streaming.FRAME_SAMPLES` samples (0 = no streaming: every sentence is
    decoded whole)."""
    stream_growth: int | None = None
    """A later window is at most this many times the frames already decoded; None = from the
    speed the warm-up showed (:func:`agent.voice.streaming.auto_growth`)."""
    stream_max_window_frames: int = streaming.MAX_WINDOW_FRAMES
    """Longest window, in frames of :data:`~agent.voice.streaming.FRAME_SAMPLES` samples; bounds
    the decoder's working memory."""
