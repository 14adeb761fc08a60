"""The onnxruntime session a voice runs, whole or switchable between front and decoder.

A voice that streams (see :mod:`agent.voice.streaming`) runs the switchable graph made by
:func:`agent.voice.split.split_model`. Making it, and measuring the decoder's exact window
padding, happens once per model: the graph goes into the optimised-model cache (keyed by the
model's sha256, like the whole graph) with the measured ``pad`` and ``hop`` in its metadata, so
later loads neither import ``onnx`` nor measure again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.hardware.runtime import RuntimeOptions
from agent.logs import get_logger
from agent.voice.bundle import BundleError, ModelFacts
from agent.voice.memory import trim_heap
from agent.voice.onnx_session import CacheOutcome, build_session_options, create_session
from agent.voice.split import DECODE_INPUT, LATENT_INPUT, DecoderGraph, SplitError, split_model
from agent.voice.streaming import exact_pad

__all__ = ["VoiceSession", "open_session"]

log = get_logger(__name__)

PAD_KEY, HOP_KEY, FACTS_KEY = "agent.stream_pad", "agent.stream_hop", "agent.model_facts"
"""Graph metadata: the measured window padding (latent frames; "none" = no exact padding) and
the audio samples per latent frame; the model's :class:`ModelFacts` (JSON), scanned from the
bytes the graph was made from, so a later load needs no scan of the model."""
_PROBE_FEEDS: Mapping[str, np.ndarray] = {
    "input": np.asarray([[1, 8, 2]], dtype=np.int64),
    "input_lengths": np.asarray([3], dtype=np.int64),
    "scales": np.asarray([0.667, 1.0, 0.8], dtype=np.float32),
    "sid": np.asarray([0], dtype=np.int64),
}
"""Values for the voice's own inputs while its decoder is measured (the decoder branch may read
some of them)."""
CACHE_PART = "switch-4"
"""Names the switchable graph in the optimised-model cache; a new form of it gets a new name."""
_FRONT = np.asarray(False)
_DECODE = np.asarray(True)


@dataclass(frozen=True, slots=True)
class VoiceSession:
    """A voice's session: the whole graph, or (``split``) the switchable one."""

    session: Any
    provider: str
    split: bool = False
    frame_shape: tuple[int, ...] = ()
    """Shape of the latent without its time axis (split only)."""
    hop: int = 0
    """Audio samples per latent frame (split only)."""
    pad: int | None = None
    """Latent frames of context that make windowed decoding exact; None = do not window."""
    cache: CacheOutcome = "off"
    """What the optimised-model cache did at load: ``hit`` = nothing was built or measured
    (``tts-agent prepare`` fills the cache before a first start)."""
    facts: ModelFacts | None = None
    """The model's facts as recorded in the switchable graph when it was built from the
    verified model (None: not recorded, the caller scans the model)."""

    def audio(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mono float audio of a whole sentence."""
        if self.split:
            return self.decode(self.latent(feeds), feeds)
        return np.asarray(self.session.run(None, dict(feeds))[0], dtype=np.float32).reshape(-1)

    def latent(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """The front's latent, ``frame_shape`` + ``[frames]`` (split only)."""
        idle = np.zeros((*self.frame_shape, 1), dtype=np.float32)
        return np.asarray(self._run(feeds, idle, _FRONT), dtype=np.float32)

    def decode(self, latent: np.ndarray, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mono float audio of ``latent`` (split only)."""
        return np.asarray(self._run(feeds, latent, _DECODE), dtype=np.float32).reshape(-1)

    def _run(self, feeds: Mapping[str, np.ndarray], latent: np.ndarray, flag: np.ndarray) -> Any:
        if not self.split:
            raise RuntimeError("this voice runs its whole graph")
        return self.session.run(None, {**feeds, LATENT_INPUT: latent, DECODE_INPUT: flag})[0]


def open_session(model_path: Path, runtime: RuntimeOptions, model_sha256: str | None, *,
                 split: bool, model_bytes: Callable[[], bytes] | None = None,
                 model_facts: Callable[[], ModelFacts] | None = None) -> VoiceSession:
    """The session for the model at ``model_path``: switchable when ``split`` is asked for and
    the graph is a Piper VITS graph, else the whole graph. Streaming is an optimisation: when
    the switchable graph cannot be made or loaded, the voice still loads whole (logged), never
    fails for it.

    ``model_bytes`` returns the model's verified bytes (:func:`~agent.voice.bundle.read_model`;
    it raises :class:`~agent.voice.bundle.BundleError` for a model that does not match its
    manifest); it is asked only when the optimised-model cache lacks what is needed, and
    both the switchable graph and the whole one are made from what it returned, never from the
    file. Without it, onnxruntime reads ``model_path`` (tools that load a file they made).
    ``model_facts`` gives those bytes' facts, recorded in a switchable graph it builds."""
    source = functools.cache(model_bytes) if model_bytes is not None else None
    if split:
        try:
            return _split_session(model_path, runtime, model_sha256, source, model_facts)
        except BundleError:
            raise
        except SplitError as exc:
            log.info("voice_not_split", model=str(model_path), reason=str(exc))
        except Exception as exc:  # onnx/onnxruntime raise their own types
            log.warning("voice_split_failed", model=str(model_path), error=repr(exc))
    outcome: list[CacheOutcome] = []
    session, provider = create_session(model_path, runtime, model_sha256=model_sha256,
                                       graph=source, on_cache=outcome.append)
    return VoiceSession(session, provider, cache=outcome[-1] if outcome else "off")


def _split_session(model_path: Path, runtime: RuntimeOptions, model_sha256: str | None,
                   source: Callable[[], bytes] | None,
                   facts: Callable[[], ModelFacts] | None) -> VoiceSession:
    built: list[bool] = []

    def build() -> bytes:
        built.append(True)
        graph = model_path if source is None else source()
        recorded = {} if facts is None else {FACTS_KEY: _facts_text(facts())}
        return split_model(graph, lambda decoder: {**_measure(decoder), **recorded})

    outcome: list[CacheOutcome] = []
    session, provider = create_session(model_path, runtime, model_sha256, part=CACHE_PART,
                                       graph=build, on_cache=outcome.append)
    if built:  # the graph copies made while building it are garbage now: give them back
        trim_heap()
    names = {i.name: i for i in session.get_inputs()}
    if LATENT_INPUT not in names or DECODE_INPUT not in names:
        raise SplitError(f"cached graph lacks {LATENT_INPUT}/{DECODE_INPUT}")
    meta = session.get_modelmeta().custom_metadata_map
    pad_text, hop_text = meta.get(PAD_KEY, "none"), meta.get(HOP_KEY, "0")
    frame_shape = tuple(names[LATENT_INPUT].shape[:-1])
    if not all(isinstance(d, int) for d in frame_shape):
        raise SplitError(f"cached graph's latent has no fixed frame shape: {frame_shape}")
    voice = VoiceSession(session, provider, split=True, frame_shape=frame_shape,
                         hop=int(hop_text), pad=None if pad_text == "none" else int(pad_text),
                         cache=outcome[-1] if outcome else "off",
                         facts=_recorded_facts(meta.get(FACTS_KEY)))
    log.info("voice_split", model=str(model_path), pad=voice.pad, hop=voice.hop)
    return voice


def _facts_text(facts: ModelFacts) -> str:
    return json.dumps({"symbols": facts.symbols, "predicts_durations": facts.predicts_durations})


def _recorded_facts(text: str | None) -> ModelFacts | None:
    """The facts a cached graph records, or None (none recorded, or not in this form)."""
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    symbols, durations = data.get("symbols"), data.get("predicts_durations")
    if not (symbols is None or (type(symbols) is int and symbols > 0)) \
            or type(durations) is not bool:
        return None
    return ModelFacts(symbols, predicts_durations=durations)


def _measure(decoder: DecoderGraph) -> dict[str, str]:
    """The decoder's exact window padding and its hop, measured on the decoder alone."""
    import onnxruntime as ort

    options = build_session_options(RuntimeOptions())
    session = ort.InferenceSession(decoder.graph, sess_options=options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs() if i.name != LATENT_INPUT]
    unknown = [n for n in names if n not in _PROBE_FEEDS]
    if unknown:
        raise SplitError(f"the decoder reads unknown voice inputs {unknown}")
    feeds = {n: _PROBE_FEEDS[n] for n in names}

    def decode(latent: np.ndarray) -> np.ndarray:
        audio = session.run(None, {**feeds, LATENT_INPUT: latent})[0]
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    hop = decode(np.zeros((*decoder.frame_shape, 4), np.float32)).size // 4
    pad = exact_pad(decode, decoder.frame_shape, hop) if hop > 0 else None
    log.info("decoder_window_measured", pad=pad, hop=hop)
    return {PAD_KEY: "none" if pad is None else str(pad), HOP_KEY: str(hop)}
