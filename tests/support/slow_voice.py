"""A voice that synthesizes slower than real time: a slow board, on any machine.

:func:`slow_down` wraps the onnxruntime session of every voice loaded afterwards (in this
process) so that each decoder run waits ``factor`` times the duration of the audio it just
produced, after running the real model. The voice's warm-up measures that speed like any other
(``Voice.warmup_s`` against ``warmup_audio_s``), streaming decodes in windows as usual, and the
audio is the model's own: only the time it takes changes, as on a board ``factor`` times slower
than real time. The front of a switchable graph (the latent, no audio) runs at full speed.

The voice to slow is :mod:`tests.support.quant_voice` built with a long ``hop``, so that its
sentences last long enough to be streamed in several decoder windows (see :func:`build_bundle`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import quant_voice

VOICE = quant_voice.VOICE
HOP = 256
"""Samples per phoneme id: 16 ms at the voice's 16 kHz, so a sentence lasts about a second."""


def build_bundle(models_dir: Path) -> Path:
    """``models_dir/conv-test/``: the Piper-structured test voice with :data:`HOP`."""
    return quant_voice.build_bundle(models_dir, hop=HOP)


class SlowSession:
    """An ``InferenceSession`` whose audio-producing runs take ``factor`` x the audio's length."""

    def __init__(self, session: Any, sample_rate: int, factor: float) -> None:
        self._session = session
        self._rate = sample_rate
        self._factor = factor

    def run(self, output_names: Any, feeds: dict[str, Any], *args: Any) -> Any:
        from agent.voice.split import DECODE_INPUT

        outputs = self._session.run(output_names, feeds, *args)
        if DECODE_INPUT not in feeds or bool(np.asarray(feeds[DECODE_INPUT])):
            time.sleep(self._factor * np.asarray(outputs[0]).size / self._rate)
        return outputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def slow_down(monkeypatch: pytest.MonkeyPatch, factor: float,
              sample_rate: int = quant_voice.SAMPLE_RATE) -> None:
    """Voices loaded from now on (in this process) decode ``factor`` x slower than real time."""
    import agent.voice.voice as voice_module

    original = voice_module.open_session

    def slowed(*args: Any, **kwargs: Any) -> Any:
        engine = original(*args, **kwargs)
        return dataclasses.replace(engine, session=SlowSession(engine.session, sample_rate,
                                                               factor))

    monkeypatch.setattr(voice_module, "open_session", slowed)
