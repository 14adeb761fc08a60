"""What the tests pin about the host they run on, so that its CPU, board, sound card, user and
checkout location do not change what a test sees.

The hardware profile picks the model variant from the CPU (int8 where it has fast int8 dot
products: AVX-512 VNNI, AVX-VNNI, ARM dotprod); the tiny generated voice has fp32 only, so on
such a host the agent rightly warns ``variant_unavailable`` on stderr. Tests that assert a
quiet stderr pin the variant the tiny voice has (:data:`TINY_VOICE_ENV`, or
``agent_settings(..., variant=TINY_VOICE_VARIANT)``); tests of the choice itself keep ``auto``.
"""

from __future__ import annotations

TINY_VOICE_VARIANT = "fp32"
"""The one variant ``tests/support/make_tiny_voice.py`` builds."""

TINY_VOICE_ENV = {"TTS_AGENT_MODELS__VARIANT": TINY_VOICE_VARIANT}
"""Settings (environment) of a ``tts-agent`` process that serves the tiny voice on any CPU."""
