"""The quantizer's error: everything that stops ``tts-agent quantize`` with a message."""

from __future__ import annotations

__all__ = ["QuantizeError"]


class QuantizeError(Exception):
    """Quantization could not run: bad input files, bad sentences, onnxruntime failure."""
