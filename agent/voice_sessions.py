"""The onnxruntime sessions a voice runs: its whole graph, or its front and decoder apart.

A voice that streams (see :mod:`agent.streaming`) runs two sessions made by
:func:`agent.model_split.split_model`. The split and the measurement of the decoder's exact
window padding happen once per model: both halves go into the optimised-model cache (keyed by
the model's sha256, like the whole graph), the decoder with the measured ``pad`` and ``hop`` in
its metadata, so later loads neither import ``onnx`` nor measure again.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agent.logs import get_logger
from agent.model_split import SplitError, SplitModel, split_model
from agent.onnx_session import RuntimeOptions, build_session_options, create_session
from agent.streaming import exact_pad

__all__ = ["VoiceSessions", "open_sessions"]

log = get_logger(__name__)

PAD_KEY, HOP_KEY = "agent.stream_pad", "agent.stream_hop"
"""Decoder metadata: the measured window padding (latent frames; "none" = no exact padding)
and the audio samples per latent frame."""
_PROBE_FEEDS: Mapping[str, np.ndarray] = {
    "input": np.asarray([[1, 8, 2]], dtype=np.int64),
    "input_lengths": np.asarray([3], dtype=np.int64),
    "scales": np.asarray([0.667, 1.0, 0.8], dtype=np.float32),
    "sid": np.asarray([0], dtype=np.int64),
}
"""Values for model inputs a decoder half may also need while it is being measured."""


@dataclass(frozen=True, slots=True)
class VoiceSessions:
    """``main`` runs the whole model, or only its front when ``decoder`` is set."""

    main: Any
    provider: str
    decoder: Any | None = None
    latent: str = ""
    decoder_inputs: tuple[str, ...] = field(default=())
    """Model inputs the decoder also takes (fed from the sentence's feeds)."""
    hop: int = 0
    """Audio samples per latent frame."""
    pad: int | None = None
    """Latent frames of context that make windowed decoding exact; None = do not window."""

    def decode(self, latent: np.ndarray, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mono float audio of ``latent`` (decoder sessions only)."""
        if self.decoder is None:
            raise RuntimeError("this voice runs its whole graph in one session")
        inputs = {self.latent: latent, **{name: feeds[name] for name in self.decoder_inputs}}
        return np.asarray(self.decoder.run(None, inputs)[0], dtype=np.float32).reshape(-1)


def open_sessions(model_path: Path, runtime: RuntimeOptions, model_sha256: str | None, *,
                  split: bool) -> VoiceSessions:
    """The sessions for ``model_path``: front + decoder when ``split`` is asked for and the graph
    is a Piper VITS graph, else the whole graph."""
    if split:
        try:
            return _split_sessions(model_path, runtime, model_sha256)
        except SplitError as exc:
            log.info("voice_not_split", model=str(model_path), reason=str(exc))
    session, provider = create_session(model_path, runtime, model_sha256=model_sha256)
    return VoiceSessions(session, provider)


def _split_sessions(model_path: Path, runtime: RuntimeOptions,
                    model_sha256: str | None) -> VoiceSessions:
    runtime = replace(runtime, shared_threads=True)
    halves = functools.cache(lambda: split_model(model_path))
    decoder, _ = create_session(model_path, runtime, model_sha256, part="decoder",
                                graph=lambda: _measured_decoder(halves()))
    front, provider = create_session(model_path, runtime, model_sha256, part="front",
                                     graph=lambda: halves().front)
    latent = front.get_outputs()[0].name
    names = [i.name for i in decoder.get_inputs()]
    if latent not in names:
        raise SplitError(f"cached halves do not fit: decoder inputs {names}, latent {latent!r}")
    meta = decoder.get_modelmeta().custom_metadata_map
    pad_text, hop_text = meta.get(PAD_KEY, "none"), meta.get(HOP_KEY, "0")
    sessions = VoiceSessions(front, provider, decoder, latent,
                             tuple(n for n in names if n != latent),
                             hop=int(hop_text), pad=None if pad_text == "none" else int(pad_text))
    log.info("voice_split", model=str(model_path), latent=latent, pad=sessions.pad,
             hop=sessions.hop)
    return sessions


def _measured_decoder(halves: SplitModel) -> bytes:
    """The decoder half with its measured window padding and hop in its metadata."""
    import onnx
    import onnxruntime as ort

    options = build_session_options(RuntimeOptions(graph_optimization="basic"))
    session = ort.InferenceSession(halves.decoder, sess_options=options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    unknown = [n for n in names if n != halves.latent and n not in _PROBE_FEEDS]
    if unknown:
        raise SplitError(f"decoder half needs inputs {unknown}")
    sessions = VoiceSessions(session, "", session, halves.latent,
                             tuple(n for n in names if n != halves.latent))
    hop = sessions.decode(np.zeros((1, halves.channels, 4), np.float32), _PROBE_FEEDS).size // 4
    pad = exact_pad(lambda z: sessions.decode(z, _PROBE_FEEDS), halves.channels, hop) \
        if hop > 0 else None
    model = onnx.load_from_string(halves.decoder)
    for key, value in ((PAD_KEY, "none" if pad is None else str(pad)), (HOP_KEY, str(hop))):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    log.info("decoder_window_measured", pad=pad, hop=hop)
    return bytes(model.SerializeToString())
