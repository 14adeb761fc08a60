"""The one place where settings and the hardware profile become a voice's load options."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agent.hardware.runtime import RuntimeOptions
from agent.voice.options import TextLexicon, TextOptions, VoiceOptions

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile
    from agent.settings import Settings

__all__ = ["ORT_CACHE_SUBDIR", "voice_options"]

ORT_CACHE_SUBDIR = "ort"
"""The optimised-model cache's directory below ``cache.dir``."""


def voice_options(settings: Settings, profile: EffectiveProfile | None = None, *,
                  lexicon: TextLexicon | None = None) -> VoiceOptions:
    """The options voices are loaded with: the profile's onnxruntime options and model variant
    (explicit settings already applied to both), the ``synthesis.*`` text and streaming settings,
    the ``text.*`` settings with ``lexicon`` (the device lexicon every voice shares), and the
    optimised-model cache in ``<cache.dir>/ort``.

    ``profile`` is what :func:`agent.hardware.effective.profile_or_reason` resolved; None (no
    profile) means one thread on the CPU and ``models.variant`` (fp32 for ``auto``).
    """
    if profile is not None:
        runtime, variant = profile.runtime.options, profile.runtime.model_variant
    else:
        runtime = RuntimeOptions()
        variant = "fp32" if settings.models.variant == "auto" else settings.models.variant
    if runtime.optimized_cache_dir is None:
        runtime = replace(runtime, optimized_cache_dir=settings.cache.dir / ORT_CACHE_SUBDIR)
    synthesis, text = settings.synthesis, settings.text
    return VoiceOptions(
        variant=variant,
        runtime=runtime,
        max_model_bytes=settings.models.max_model_bytes,
        max_chars=synthesis.max_text_chars,
        text=TextOptions(normalize=text.normalize, date_order=text.date_order,
                         drop_symbols=text.symbols == "drop", lexicon=lexicon),
        phoneme_cache_size=synthesis.phoneme_cache_size,
        sentence_silence_s=synthesis.sentence_silence_s,
        max_clause_phonemes=synthesis.max_clause_phonemes,
        stream_first_frames=synthesis.stream_first_frames,
        stream_growth=synthesis.stream_growth,
        stream_max_window_frames=synthesis.stream_max_window_frames,
    )
