"""A loaded Piper voice: verified bundle + onnxruntime session + text frontend.

``Voice.synthesize`` turns text into 16-bit PCM :class:`AudioChunk` s, lazily, so a caller can
start playing the first sentence while the next is synthesized: one chunk per sentence, except
that a Piper voice streams a request's first sentence in decoder windows (see
:mod:`agent.voice.streaming`), so its first part plays while the rest is decoded. The model is
warmed up at load (one short inference), so the first real request does not pay for
onnxruntime's lazy initialisation, and a model that produces silence or NaNs is refused.

``Voice.load(bundle_dir, options)`` takes one :class:`agent.voice.options.VoiceOptions`.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.audio.format import AudioChunk
from agent.logs import get_logger
from agent.text.document import Piece
from agent.text.frontend import Frontend, Sentence, TextNormalizer
from agent.voice import streaming
from agent.voice.bundle import (
    Bundle,
    BundleError,
    ModelFacts,
    check_model,
    opened_model,
    read_bundle,
    read_verified,
)
from agent.voice.config import MAX_CONFIG_BYTES, VoiceConfig, VoiceLoadError
from agent.voice.model_source import ModelSource
from agent.voice.onnx_session import pin_current_thread
from agent.voice.options import VoiceOptions
from agent.voice.sessions import VoiceSession, open_session
from agent.voice.streaming import StreamGain, WindowPlan, peak_normalize

__all__ = ["SynthesisParams", "Voice", "VoiceConfig", "VoiceLoadError", "build_frontend",
           "model_feeds"]

log = get_logger(__name__)

WARMUP_TEXT = "Ready."
REQUIRED_INPUTS = ("input", "input_lengths", "scales")
SECONDS_PER_ID = (0.020, 0.090)
"""How long a phoneme id lasts at the warm-up of a voice that predicts durations, per unit of
length scale (s), at the config's sample rate: speech rate bounds wide enough for any voice's
natural pace. Outside them, the model was trained for another sample rate than the config
says (docs/voices.md)."""


def model_feeds(ids: Sequence[int], scales: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """The Piper model inputs for one sentence's phoneme ids and its (noise, length, noise_w)
    scales (no ``sid``)."""
    return {
        "input": np.asarray([ids], dtype=np.int64),
        "input_lengths": np.asarray([len(ids)], dtype=np.int64),
        "scales": np.asarray(scales, dtype=np.float32),
    }


def build_frontend(config: VoiceConfig, options: VoiceOptions, *,
                   cache_size: int | None = None) -> Frontend:
    """The text frontend of a voice of ``config`` loaded with ``options``: its espeak-ng voice
    and id map, and the text stages of ``options.text`` (the normalizer of the voice's
    language, the lexicon, the symbols rule, the scripts it reads). ``tts-agent phonemize``
    builds the same."""
    from agent.text.scripts import scripts_for  # regex: here, on the loader's helper thread

    text = options.text
    normalizer: TextNormalizer | None = None
    if text.normalize:
        from agent.text.normalize import NormalizeOptions, Normalizer

        language = config.languages[0] if config.languages else config.espeak_voice
        normalizer = Normalizer.for_language(language, NormalizeOptions(date_order=text.date_order))
    return Frontend(config.espeak_voice, config.phoneme_id_map, max_chars=options.max_chars,
                    cache_size=options.phoneme_cache_size if cache_size is None else cache_size,
                    normalizer=normalizer, lexicon=text.lexicon, drop_symbols=text.drop_symbols,
                    scripts=scripts_for(config.languages))


@dataclass(frozen=True, slots=True)
class SynthesisParams:
    """Per-request synthesis settings; ``None`` means the voice's own default."""

    length_scale: float | None = None
    """Phoneme duration multiplier: > 1 is slower speech."""
    noise_scale: float | None = None
    """Generator noise (expressiveness); 0 makes output deterministic."""
    noise_w: float | None = None
    """Duration-predictor noise (rhythm variation); 0 makes durations deterministic."""
    speaker_id: int | None = None
    """Speaker of a multi-speaker voice."""


class Voice:
    """One voice variant, loaded and warm. Thread-safe: ``synthesize`` may run concurrently."""

    def __init__(self, bundle: Bundle, options: VoiceOptions | None = None, *,
                 source: ModelSource | None = None,
                 config: VoiceConfig | None = None) -> None:
        """``source`` checks the model against its sha256 and gives its verified bytes and
        facts (see :class:`ModelSource` and :meth:`load`); onnxruntime loads those bytes, never
        the file. Without it, the model is read and checked here. ``config`` is the voice
        config parsed from the bytes that matched the manifest; without it, it is read (and
        hashed) here."""
        started = time.monotonic()
        self.options = options = options or VoiceOptions()
        self.bundle = bundle
        self.name = bundle.voice
        self.version = bundle.version
        self.variant = options.variant
        self.config = config or self.read_config(bundle)
        if self.config.sample_rate != bundle.sample_rate:
            raise VoiceLoadError(
                f"{bundle.voice}: config says {self.config.sample_rate} Hz, "
                f"manifest says {bundle.sample_rate} Hz"
            )
        self.sample_rate = self.config.sample_rate
        self.sentence_silence_s = options.sentence_silence_s
        self.max_clause_phonemes = options.max_clause_phonemes
        self.facts = ModelFacts(None, predicts_durations=False)
        """What the model's graph showed (:mod:`agent.voice.graph_scan`)."""
        # The text frontend (espeak-ng, the normalizer) is built while the session loads.
        with ThreadPoolExecutor(1, thread_name_prefix="frontend") as pool:
            frontend = pool.submit(build_frontend, self.config, options)
            self.engine = self._open_engine(source or ModelSource(bundle, self.variant))
            self.frontend = frontend.result()
        self.session, self.provider = self.engine.session, self.engine.provider
        self._check_signature()
        if self.facts.symbols is not None:
            self.config.check_symbols(self.facts.symbols, bundle.config_path)
        workers = options.runtime.decode_workers
        self._decoders = (ThreadPoolExecutor(workers, thread_name_prefix="decode",
                                             initializer=pin_current_thread,
                                             initargs=(options.runtime,))
                          if workers > 1 and self.engine.split else None)
        """Threads that decode a sentence's windows at once (None: on the caller's thread)."""
        self.window_plan: WindowPlan | None = None
        """How sentences are cut into windows; None = every sentence is decoded whole (so is
        the warm-up: the plan's growth follows the speed it shows)."""
        self.warmup_s = self._warm_up()
        self.window_plan = self._plan_windows()
        self.load_s = time.monotonic() - started
        self.loaded_at = time.time()
        log.info("voice_loaded", voice=self.name, version=self.version, variant=self.variant,
                 provider=self.provider, load_s=round(self.load_s, 3),
                 warmup_s=round(self.warmup_s, 3), streaming=self.streaming,
                 session_cache=self.engine.cache)

    @classmethod
    def load(cls, bundle_dir: Path, options: VoiceOptions | None = None) -> Voice:
        """Load the bundle in ``bundle_dir``, verified against its manifest.

        The model file is opened once and hashed as it streams past on a helper thread while
        onnxruntime builds the session from the optimised-model cache, none of it held; no
        voice serves before it matched. On a cache miss it is read into memory, matched again,
        and onnxruntime builds from those very bytes. A model rewritten in place or renamed
        over during the load changes nothing that loads (docs/voices.md).
        """
        options = options or VoiceOptions()
        try:
            bundle = read_bundle(bundle_dir, options.variant,
                                 max_file_bytes=options.max_model_bytes)
            config = cls.read_config(bundle)  # small: hashed before it is parsed
            with opened_model(bundle, options.variant) as handle, \
                    ThreadPoolExecutor(1, thread_name_prefix="sha256") as pool:
                hashing = pool.submit(check_model, bundle, options.variant, handle)
                return cls(bundle, options, source=ModelSource(
                    bundle, options.variant, handle, hashing.result), config=config)
        except BundleError as exc:
            raise VoiceLoadError(str(exc)) from exc

    @staticmethod
    def read_config(bundle: Bundle) -> VoiceConfig:
        """The bundle's voice config, parsed from the very bytes that matched its sha256."""
        path = bundle.config_path
        return VoiceConfig.from_bytes(read_verified(bundle, path.name, MAX_CONFIG_BYTES), path)

    def _open_engine(self, source: ModelSource) -> VoiceSession:
        """The onnxruntime session of the chosen model (switchable when the voice streams),
        built from the verified bytes ``source`` reads (a cache hit reads none: the model is
        hashed, never held); its facts from those bytes, the cached graph's record, or a
        streamed scan, each once the model matched its sha256."""
        model_path = self.bundle.model_path(self.variant)
        read = functools.cache(source.read)  # read once, whoever asks
        try:
            engine = open_session(model_path, self.options.runtime,
                                  self.bundle.sha256.get(model_path.name),
                                  split=self.options.stream_first_frames > 0,
                                  model_bytes=lambda: read()[0], model_facts=lambda: read()[1])
        except BundleError:
            raise
        except Exception as exc:  # onnxruntime raises its own exception types
            detail = " ".join(str(exc).split())  # one line: onnxruntime's may span several
            raise VoiceLoadError(f"{model_path}: onnxruntime cannot load it: {detail}") from exc
        if engine.facts is not None and not read.cache_info().currsize:
            source.checked()  # a hit serves nothing the model file does not match
        self.facts = (read()[1] if read.cache_info().currsize  # those bytes matched
                      else engine.facts or source.facts())  # the scan matches what it scans
        return engine

    def _plan_windows(self) -> WindowPlan | None:
        """The window plan for a streaming voice (after the warm-up: automatic growth follows
        its speed), or None when the voice decodes whole."""
        options, engine = self.options, self.engine
        if engine.pad is None or engine.hop <= 0 or options.stream_first_frames <= 0:
            return None
        per_frame = streaming.FRAME_SAMPLES / engine.hop  # settings' frames -> cut's
        return WindowPlan(
            math.ceil(options.stream_first_frames * per_frame),
            options.stream_growth or streaming.auto_growth(self.warmup_s, self.warmup_audio_s),
            math.ceil(options.stream_max_window_frames * per_frame), engine.pad)

    @property
    def sha256(self) -> str:
        """sha256 of the loaded model file."""
        return self.bundle.sha256[self.bundle.model_path(self.variant).name]

    def _check_signature(self) -> None:
        names = {i.name for i in self.session.get_inputs()}
        missing = [n for n in REQUIRED_INPUTS if n not in names]
        if missing:
            raise VoiceLoadError(
                f"{self.name}: model inputs {sorted(names)} lack {missing}; not a Piper voice"
            )
        self._has_sid = "sid" in names
        if self.config.num_speakers > 1 and not self._has_sid:
            raise VoiceLoadError(
                f"{self.name}: multi-speaker config but the model has no sid input")
        if not self.session.get_outputs():
            raise VoiceLoadError(f"{self.name}: model has no outputs")

    warmup_text = WARMUP_TEXT

    def _warm_up(self) -> float:
        """One inference before serving: onnxruntime initialises lazily, and a model that
        yields no audio, NaNs or silence is refused here rather than on a user's request."""
        started = time.monotonic()
        ids = self.frontend.ids(self.frontend.sentences(WARMUP_TEXT)[0])
        audio = self.ids_to_audio(ids, SynthesisParams(noise_scale=0.0, noise_w=0.0))
        if audio.size == 0 or not np.all(np.isfinite(audio)):
            raise VoiceLoadError(f"{self.name}: warm-up produced no audio or non-finite samples")
        if float(np.max(np.abs(audio))) < 1e-4:
            raise VoiceLoadError(f"{self.name}: warm-up produced silence")
        self.warmup_audio_s = audio.size / self.sample_rate
        if self.facts.predicts_durations:
            self._check_rate(audio.size / len(ids) / self.config.length_scale)
        return time.monotonic() - started

    def _check_rate(self, samples_per_id: float) -> None:
        """Refuse a config whose sample rate is not the one the model speaks at: its phonemes
        would last implausibly long or short at that rate (:data:`SECONDS_PER_ID`)."""
        low, high = SECONDS_PER_ID
        seconds = samples_per_id / self.sample_rate
        if not low <= seconds <= high:
            implied = (round(samples_per_id / high), round(samples_per_id / low))
            raise VoiceLoadError(
                f"{self.name}: at the config's {self.sample_rate} Hz a phoneme lasts "
                f"{seconds * 1000:.0f} ms (plausible: {low * 1000:.0f}..{high * 1000:.0f} ms): "
                f"the model speaks at about {implied[0]}..{implied[1]} Hz, not "
                f"{self.sample_rate}")

    @property
    def streaming(self) -> dict[str, float] | None:
        """How this voice streams, for health reports: its first and longest window, the window
        growth and the context decoded on each side of a cut (seconds of audio); None when it
        decodes whole."""
        plan = self.window_plan
        if plan is None:
            return None

        def seconds(frames: int) -> float:
            return round(frames * self.engine.hop / self.sample_rate, 4)

        return {"first_window_s": seconds(plan.first_frames), "growth": plan.growth,
                "max_window_s": seconds(plan.max_window_frames),
                "context_s": seconds(plan.pad)}

    @property
    def chunking(self) -> tuple[int, ...]:
        """Everything besides text, model and parameters that shapes the audio's chunks and
        levels (clause splitting, stream windows), for cache keys. Not the window growth: it
        follows the board's measured speed, and only moves where later windows start."""
        plan = self.window_plan
        return (self.max_clause_phonemes,
                *((plan.first_frames, plan.max_window_frames) if plan else ()))

    def ids_to_audio(self, ids: Sequence[int], params: SynthesisParams) -> np.ndarray:
        """Run the model on one sentence's phoneme ids; float32 mono samples, unnormalised.
        A voice that decodes in windows decodes the sentence in windows of at most
        ``max_window_frames`` (the same samples, bounded memory)."""
        feeds = self._feeds(ids, params)
        plan = self.window_plan
        if plan is None:
            return self.engine.audio(feeds)
        latent = self.engine.latent(feeds)
        windows = plan.windows(latent.shape[-1], first=False)
        return np.concatenate(list(self._decode_all(latent, feeds, windows)))

    def _decode_all(self, latent: np.ndarray, feeds: Mapping[str, np.ndarray],
                    windows: Sequence[tuple[int, int]]) -> Iterator[np.ndarray]:
        """Audio of each window, in order; with ``runtime.decode_workers`` > 1 the windows are
        decoded that many at once on the voice's decoder threads (same audio: each window is
        exact on its own)."""
        if self._decoders is None or len(windows) < 2:
            yield from (self._decode(latent, feeds, start, end) for start, end in windows)
            return
        parts = [self._decoders.submit(self._decode, latent, feeds, start, end)
                 for start, end in windows]
        try:
            yield from (part.result() for part in parts)
        finally:
            for part in parts:
                part.cancel()

    def _decode(self, latent: np.ndarray, feeds: Mapping[str, np.ndarray], start: int,
                end: int) -> np.ndarray:
        """Audio of latent frames ``[start, end)`` (a voice that decodes in windows)."""
        plan, engine = self.window_plan, self.engine
        if plan is None:
            raise RuntimeError("this voice does not decode in windows")
        return plan.decode(lambda z: engine.decode(z, feeds), latent, start, end, engine.hop)

    def _feeds(self, ids: Sequence[int], params: SynthesisParams) -> dict[str, np.ndarray]:
        config = self.config
        feeds = model_feeds(ids, (
            config.noise_scale if params.noise_scale is None else params.noise_scale,
            config.length_scale if params.length_scale is None else params.length_scale,
            config.noise_w if params.noise_w is None else params.noise_w,
        ))
        if self._has_sid:
            speaker = params.speaker_id or 0
            if not 0 <= speaker < max(1, config.num_speakers):
                raise ValueError(f"speaker id {speaker} out of range 0..{config.num_speakers - 1}")
            feeds["sid"] = np.asarray([speaker], dtype=np.int64)
        return feeds

    def sentences(self, text: str | Sequence[Piece], *, verbatim: bool = False) -> list[Sentence]:
        """The frontend's sentences for a text or pieces (text and given phonemes); raises
        ``TextError`` for unspeakable text. ``verbatim`` text is not normalised."""
        return self.frontend.sentences(text, self.max_clause_phonemes, verbatim=verbatim)

    def synthesize(self, text: str | Sequence[Piece], params: SynthesisParams | None = None, *,
                   verbatim: bool = False) -> Iterator[AudioChunk]:
        """16-bit mono chunks (one per sentence or decoder window), synthesized as the caller
        iterates.

        Text errors (empty, too long) are raised before the first chunk.
        """
        return self.synthesize_sentences(self.sentences(text, verbatim=verbatim), params)

    def synthesize_sentences(
        self, sentences: Sequence[Sentence], params: SynthesisParams | None = None
    ) -> Iterator[AudioChunk]:
        """Like :meth:`synthesize` for sentences the caller has already made."""
        params = params or SynthesisParams()
        silence = np.zeros(int(self.sentence_silence_s * self.sample_rate), dtype=np.float32)
        for index, sentence in enumerate(sentences):
            ids = self.frontend.ids(sentence)
            if index == 0 and self.window_plan is not None:
                # Only a request's first sentence streams: later ones are synthesized while the
                # one before them plays.
                yield from self._streamed(ids, params, sentence.text, silence)
                continue
            audio = peak_normalize(self.ids_to_audio(ids, params))
            if silence.size:
                audio = np.concatenate([audio, silence])
            yield AudioChunk.from_float(audio, self.sample_rate, sentence.text)

    def _streamed(self, ids: Sequence[int], params: SynthesisParams, text: str,
                  silence: np.ndarray) -> Iterator[AudioChunk]:
        """A request's first sentence as a chunk per latent window, each yielded as soon as it
        is decoded (see :mod:`agent.voice.streaming`)."""
        plan = self.window_plan
        if plan is None:
            raise RuntimeError("this voice does not decode in windows")
        feeds = self._feeds(ids, params)
        latent = self.engine.latent(feeds)
        windows = plan.windows(latent.shape[-1])
        gain = StreamGain(self.sample_rate)
        # The first window alone (first audio), then the rest, decode_workers at a time.
        parts = itertools.chain(self._decode_all(latent, feeds, windows[:1]),
                                self._decode_all(latent, feeds, windows[1:]))
        for number, part in enumerate(parts, 1):
            audio = peak_normalize(part) if len(windows) == 1 else gain.apply(part)
            if number == len(windows) and silence.size:
                audio = np.concatenate([audio, silence])
            yield AudioChunk.from_float(audio, self.sample_rate, text if number == 1 else "",
                                        ends_sentence=number == len(windows))
