"""What the tests pin about the host they run on, so that its CPU, board, sound card, user and
checkout location do not change what a test sees.

The hardware profile picks the model variant from the CPU (int8 where it has fast int8 dot
products: AVX-512 VNNI, AVX-VNNI, ARM dotprod); the tiny generated voice has fp32 only, so on
such a host the agent rightly warns ``variant_unavailable`` on stderr. Tests that assert a
quiet stderr pin the variant the tiny voice has (:data:`TINY_VOICE_ENV`, or
``agent_settings(..., variant=TINY_VOICE_VARIANT)``); tests of the choice itself keep ``auto``.

A streamed sentence's later windows grow with the speed the voice showed at its warm-up, so on
a busy machine two processes cut the same sentence differently (a last-bit difference in the
samples). Tests that compare two processes' audio byte for byte pin the growth
(:data:`SAME_WINDOWS_ENV`).
"""

from __future__ import annotations

TINY_VOICE_VARIANT = "fp32"
"""The one variant ``tests/support/make_tiny_voice.py`` builds."""

TINY_VOICE_ENV = {"TTS_AGENT_MODELS__VARIANT": TINY_VOICE_VARIANT}
"""Settings (environment) of a ``tts-agent`` process that serves the tiny voice on any CPU."""

SAME_WINDOWS_ENV = {"TTS_AGENT_SYNTHESIS__STREAM_GROWTH": "2"}
"""Settings (environment) that cut a streamed sentence into the same windows however fast the
machine is at the moment (``synthesis.stream_growth``)."""
