"""INT8 voices: static QDQ quantization calibrated on our own phoneme ids, gated against fp32.

Stages, each a function tests drive on its own::

    read_sentences(file) -> sentence_feeds(frontend, texts, scales) -> CalibrationReader
    quantize_model(fp32.onnx, int8.onnx, reader, recipe)   # pre-process, 2-D layout, QDQ
    measure_quality(run_fp32, run_int8, held-out feeds)    # noise scales 0: deterministic
    check_quality(report, bounds)                          # raises QualityGateError
    build_int8_bundle(...)                                 # all of it, then the bundle

The calibration reader feeds the model exactly what :class:`agent.voice.voice.Voice` feeds it
(``input``, ``input_lengths``, ``scales``), made by the voice's own frontend from real
sentences, so activation ranges come from real phoneme sequences.

Which nodes stay fp32 is the :class:`Recipe`'s decision, by node-name pattern: the text
encoder and the duration predictor decide how long each phoneme lasts, so they stay fp32 and
the int8 voice keeps the fp32 timing exactly (the gate checks it). the README, "Performance"
says how :data:`DEFAULT_RECIPE` was chosen. Everything runs on the caller's thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.logs import get_logger
from agent.quantize.quality import mel_distance_db, spectral_snr_db
from agent.voice.bundle import Bundle, BundleError, read_manifest, verify_bundle, write_manifest

__all__ = [
    "DEFAULT_BOUNDS",
    "DEFAULT_RECIPE",
    "INT8_SUFFIX",
    "CalibrationReader",
    "QualityBounds",
    "QualityGateError",
    "QualityReport",
    "QuantizeError",
    "Recipe",
    "SentenceQuality",
    "build_int8_bundle",
    "check_quality",
    "manifest_quantization",
    "measure_quality",
    "quantize_model",
    "read_sentences",
    "sentence_feeds",
    "sentences_sha256",
]

log = get_logger(__name__)

Feeds = dict[str, np.ndarray]
Scales = tuple[float, float, float]
"""Piper's ``scales`` input: (noise_scale, length_scale, noise_w)."""

INT8_SUFFIX = ".int8.onnx"
MAX_SENTENCE_FILE_BYTES = 1 << 20
MAX_SENTENCES = 1000
MAX_SENTENCE_CHARS = 1000
CALIBRATION_CHUNK = 4
"""Calibration inputs run before their ranges are merged (bounds calibration memory)."""


class QuantizeError(Exception):
    """Quantization could not run: bad input files, bad sentences, onnxruntime failure."""


class QualityGateError(QuantizeError):
    """The int8 model is not close enough to fp32; no bundle was written."""

    def __init__(self, message: str, report: QualityReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True, slots=True)
class Recipe:
    """How a voice is quantized; recorded in the bundle manifest."""

    name: str
    keep_fp32: tuple[str, ...] = ()
    """Regular expressions searched in node names; matching nodes are not quantized."""
    op_types: tuple[str, ...] = ("Conv", "MatMul")
    """Operator types to quantize (QDQ around their inputs and outputs)."""
    conv2d_blocks: tuple[str, ...] = ()
    """Regular expressions, each selecting (by node name) a block of 1-D convolutions that is
    rewritten as 2-D before quantization (:func:`agent.quantize.layout.convs_as_2d`)."""
    time_rows: int = 1
    """Rows the time axis of :attr:`time_rows_block` is cut into (1 = not cut), so that
    onnxruntime splits its 2-D convolutions across threads
    (:func:`agent.quantize.layout.fold_time_into_rows`)."""
    time_rows_block: tuple[str, ...] = ()
    """Two regular expressions: the node whose first input and the node whose output bound the
    block run on :attr:`time_rows` rows (a 2-D block, see :attr:`conv2d_blocks`)."""
    polyphase_upsamplers: tuple[str, ...] = ()
    """Regular expressions selecting 2-D ``ConvTranspose`` upsamplers rewritten as polyphase
    ``Conv`` (:func:`agent.quantize.layout.upsamplers_as_convs`), which can be quantized."""
    per_channel: bool = True
    """One weight scale per output channel instead of one per tensor."""
    reduce_range: bool = False
    """7-bit weights (for pre-VNNI x86 u8*s8 overflow); costs precision."""
    activation_type: str = "uint8"
    weight_type: str = "int8"
    calibration: str = "minmax"
    """minmax | percentile | entropy (onnxruntime calibration methods)."""
    calibration_options: Mapping[str, Any] = field(default_factory=dict)
    """Options of onnxruntime's ``create_calibrator`` (``percentile``, ``moving_average``...)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``quantize_static`` options (its ``extra_options``), JSON-serialisable."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("keep_fp32", "op_types", "conv2d_blocks", "time_rows_block",
                    "polyphase_upsamplers"):
            data[key] = list(data[key])
        data["options"] = dict(self.options)
        data["calibration_options"] = dict(self.calibration_options)
        return data

    def excluded_nodes(self, node_names: Iterable[str]) -> list[str]:
        """The node names this recipe keeps in fp32."""
        patterns = [re.compile(p) for p in self.keep_fp32]
        return [name for name in node_names if any(p.search(name) for p in patterns)]


DEFAULT_RECIPE = Recipe(
    name="piper-vits-dec2d-rows2-poly-u8s8-pc-p9999",
    keep_fp32=(
        r"^/enc_p/",  # text encoder: feeds the duration predictor
        r"^/dp/",  # duration predictor: int8 here changes phoneme lengths
        # The decoder's last stage runs at the full sample rate with 32 channels: int8 there
        # adds hiss in pauses (it hurts recognition) and is no faster.
        r"^/dec/(ups\.2|resblocks\.[6-8]|conv_post)/",
    ),
    op_types=("Conv", "MatMul"),
    conv2d_blocks=(r"^/dec/",),
    # The fp32 last stage (32 channels at the full rate) as 2-D convolutions runs on one thread
    # only; cut into 2 rows it runs on 2 (exact: the rows overlap by its receptive field).
    time_rows=2,
    time_rows_block=(r"^/dec/ups\.2/", r"^/dec/Tanh$"),
    # Polyphase Conv instead of ConvTranspose: int8 in stages 1-2, no col2im in stage 3.
    polyphase_upsamplers=(r"^/dec/ups\.",),
    # Ranges that clip the rarest 0.01 % of values: min-max ranges are set by a few outliers
    # and waste most of the 256 levels (held-out log-mel distance 4.4 dB instead of 2.6 dB).
    calibration="percentile",
    calibration_options={"percentile": 99.99, "symmetric": False},
)
"""The shipped recipe for Piper (VITS) voices; see the README, "Performance" for why."""


@dataclass(frozen=True, slots=True)
class QualityBounds:
    """What the int8 model must achieve against fp32 on every held-out sentence (noise 0)."""

    min_spectral_snr_db: float = 8.0
    """SNR of the STFT magnitudes (phase-insensitive); broken models score ~0 dB."""
    max_mel_distance_db: float = 6.0
    """RMS log-mel difference (dB, floor 80 dB below peak); int8 hiss raises it."""

    def to_json(self) -> dict[str, float]:
        return asdict(self)


DEFAULT_BOUNDS = QualityBounds()


@dataclass(frozen=True, slots=True)
class SentenceQuality:
    """int8 against fp32 for one held-out sentence."""

    text: str
    samples_fp32: int
    samples_int8: int
    spectral_snr_db: float
    mel_distance_db: float

    @property
    def same_duration(self) -> bool:
        return self.samples_fp32 == self.samples_int8


@dataclass(frozen=True, slots=True)
class QualityReport:
    """The quality gate's measurements over the held-out sentences."""

    sentences: tuple[SentenceQuality, ...]

    @property
    def durations_match(self) -> bool:
        return all(s.same_duration for s in self.sentences)

    def _values(self, name: str) -> list[float]:
        return [float(getattr(s, name)) for s in self.sentences if s.same_duration]

    def to_json(self) -> dict[str, Any]:
        snr, mel = self._values("spectral_snr_db"), self._values("mel_distance_db")
        return {
            "sentences": len(self.sentences),
            "durations_match": self.durations_match,
            "spectral_snr_db": {"min": _round(min(snr, default=float("nan"))),
                                "median": _round(float(np.median(snr)) if snr else float("nan"))},
            "mel_distance_db": {"max": _round(max(mel, default=float("nan"))),
                                "median": _round(float(np.median(mel)) if mel else float("nan"))},
        }


def _round(value: float) -> float | None:
    return round(value, 2) if np.isfinite(value) else None


# --- sentences and model inputs ------------------------------------------------------------


def read_sentences(path: Path) -> list[str]:
    """Non-empty lines of a UTF-8 file, ``#`` comment lines skipped; size-limited."""
    try:
        if path.stat().st_size > MAX_SENTENCE_FILE_BYTES:
            raise QuantizeError(f"{path}: larger than {MAX_SENTENCE_FILE_BYTES} bytes")
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuantizeError(f"cannot read sentences from {path}: {exc}") from exc
    sentences = [line.strip() for line in lines
                 if line.strip() and not line.lstrip().startswith("#")]
    if not sentences:
        raise QuantizeError(f"{path}: no sentences")
    if len(sentences) > MAX_SENTENCES:
        raise QuantizeError(f"{path}: more than {MAX_SENTENCES} sentences")
    if any(len(s) > MAX_SENTENCE_CHARS for s in sentences):
        raise QuantizeError(f"{path}: a line is longer than {MAX_SENTENCE_CHARS} characters")
    return sentences


def sentences_sha256(sentences: Sequence[str]) -> str:
    """sha256 of the sentences as used (one per line, UTF-8): names a calibration set."""
    return hashlib.sha256("".join(s + "\n" for s in sentences).encode("utf-8")).hexdigest()


def sentence_feeds(frontend: Any, texts: Iterable[str], scales: Scales) -> list[tuple[str, Feeds]]:
    """Model inputs (with their text) for every sentence the frontend makes of ``texts``.

    ``frontend`` is the voice's :class:`agent.text.frontend.Frontend`, so the ids are exactly those
    the voice is fed at run time.
    """
    from agent.voice.voice import model_feeds

    feeds: list[tuple[str, Feeds]] = []
    for text in texts:
        for sentence in frontend.sentences(text):
            feeds.append((sentence.text, model_feeds(frontend.ids(sentence), scales)))
    return feeds


class CalibrationReader:
    """onnxruntime ``CalibrationDataReader`` over prepared model inputs.

    Duck-typed (onnxruntime accepts any object with ``get_next``); rewindable.
    """

    def __init__(self, feeds: Sequence[Feeds]) -> None:
        if not feeds:
            raise QuantizeError("no calibration inputs")
        self._feeds = list(feeds)
        self._next = 0

    def __len__(self) -> int:
        return len(self._feeds)

    def get_next(self) -> Feeds | None:
        """The next input, or ``None`` when all were handed out."""
        if self._next >= len(self._feeds):
            return None
        feeds = self._feeds[self._next]
        self._next += 1
        return feeds

    def rewind(self) -> None:
        self._next = 0

    def chunks(self, size: int) -> Iterator[CalibrationReader]:
        """Readers over consecutive slices of ``size`` inputs."""
        for start in range(0, len(self._feeds), size):
            yield CalibrationReader(self._feeds[start:start + size])


# --- quantization ------------------------------------------------------------------------


def _quant_type(name: str) -> Any:
    from onnxruntime.quantization import QuantType

    types = {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8}
    if name not in types:
        raise QuantizeError(f"unknown quantization type {name!r} (uint8 or int8)")
    return types[name]


def _calibration_method(name: str) -> Any:
    from onnxruntime.quantization import CalibrationMethod

    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    if name not in methods:
        raise QuantizeError(f"unknown calibration method {name!r} ({', '.join(methods)})")
    return methods[name]


def _prepare(fp32_path: Path, out: Path, recipe: Recipe) -> tuple[list[str], dict[str, int]]:
    """onnxruntime's quantization pre-processing, then the recipe's layout rewrites."""
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from agent.quantize.layout import convs_as_2d, fold_time_into_rows, upsamplers_as_convs

    if recipe.time_rows_block and len(recipe.time_rows_block) != 2:
        raise QuantizeError("time_rows_block needs two patterns (start node, end node)")
    quant_pre_process(str(fp32_path), str(out), skip_symbolic_shape=True)
    model = onnx.load(str(out))
    counts = {"convs_rewritten_2d": sum(convs_as_2d(model, p) for p in recipe.conv2d_blocks)}
    counts["convs_in_time_rows"] = 0
    if recipe.time_rows > 1 and recipe.time_rows_block:
        start, end = recipe.time_rows_block
        counts["convs_in_time_rows"] = fold_time_into_rows(model, start, end, recipe.time_rows)
    counts["upsamplers_polyphase"] = sum(upsamplers_as_convs(model, p)
                                         for p in recipe.polyphase_upsamplers)
    if any(counts.values()):
        onnx.save(model, str(out))
    return [node.name for node in model.graph.node], counts


def _calibrate(model: Path, reader: CalibrationReader, recipe: Recipe, cache: Path,
               workdir: Path) -> None:
    """Run the calibration inputs a few at a time and store the ranges in ``cache``.

    Histogram methods need equal shapes within a batch, so they take one input at a time.
    """
    from onnxruntime.quantization import create_calibrator, save_tensors_data

    calibrator = create_calibrator(
        str(model), list(recipe.op_types),
        augmented_model_path=str(workdir / "augmented.onnx"),
        calibrate_method=_calibration_method(recipe.calibration),
        extra_options=dict(recipe.calibration_options),
    )
    averaging = bool(recipe.calibration_options.get("moving_average"))
    size = CALIBRATION_CHUNK if recipe.calibration == "minmax" and not averaging else 1
    # onnxruntime's histogram calibrators print() a line per input; stdout is the caller's.
    with contextlib.redirect_stdout(io.StringIO()):
        for chunk in reader.chunks(size):
            calibrator.collect_data(chunk)
        ranges = calibrator.compute_data()
    save_tensors_data(ranges, cache)


def quantize_model(fp32_path: Path, out_path: Path, reader: CalibrationReader, recipe: Recipe,
                   *, calibration_cache: Path | None = None) -> dict[str, Any]:
    """Quantize ``fp32_path`` into ``out_path`` (QDQ format) following ``recipe``.

    ``calibration_cache`` (optional) keeps the calibrated ranges: an existing file is reused
    instead of calibrating again (several recipes can share one calibration run). Returns
    facts for the manifest.
    """
    from onnxruntime.quantization import QuantFormat, quantize_static

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tts-quant-") as tmp:
        workdir = Path(tmp)
        prepared = workdir / "prepared.onnx"
        cache = calibration_cache or workdir / "ranges.json"
        try:
            node_names, counts = _prepare(fp32_path, prepared, recipe)
            excluded = recipe.excluded_nodes(node_names)
            if not cache.is_file():
                _calibrate(prepared, reader, recipe, cache, workdir)
            quantize_static(
                str(prepared), str(out_path), None,
                quant_format=QuantFormat.QDQ,
                op_types_to_quantize=list(recipe.op_types),
                per_channel=recipe.per_channel,
                reduce_range=recipe.reduce_range,
                activation_type=_quant_type(recipe.activation_type),
                weight_type=_quant_type(recipe.weight_type),
                nodes_to_exclude=excluded,
                calibrate_method=_calibration_method(recipe.calibration),
                calibration_cache_path=cache,
                extra_options=dict(recipe.options),
            )
        except QuantizeError:
            raise
        except Exception as exc:  # onnx and onnxruntime raise many unrelated types
            raise QuantizeError(f"quantizing {fp32_path} failed: {exc!r}") from exc
    seconds = time.monotonic() - started
    log.info("model_quantized", model=str(fp32_path), recipe=recipe.name,
             excluded_nodes=len(excluded), seconds=round(seconds, 1), **counts)
    return {"nodes": len(node_names), "nodes_kept_fp32": len(excluded), **counts,
            "seconds": round(seconds, 1)}


# --- quality -------------------------------------------------------------------------------


def measure_quality(reference: Callable[[Feeds], np.ndarray],
                    candidate: Callable[[Feeds], np.ndarray],
                    heldout: Sequence[tuple[str, Feeds]], sample_rate: int) -> QualityReport:
    """Run both models on every held-out input and compare their audio.

    ``reference`` / ``candidate`` map model inputs to audio (e.g. a session's first output);
    pass noise scales 0 in the inputs so the comparison is deterministic.
    """
    if not heldout:
        raise QuantizeError("no held-out sentences for the quality gate")
    results = []
    for text, feeds in heldout:
        ref = np.asarray(reference(feeds), dtype=np.float32).reshape(-1)
        out = np.asarray(candidate(feeds), dtype=np.float32).reshape(-1)
        if ref.size == out.size and np.all(np.isfinite(out)):
            results.append(SentenceQuality(text, ref.size, out.size, spectral_snr_db(ref, out),
                                           mel_distance_db(ref, out, sample_rate)))
        else:
            results.append(SentenceQuality(text, ref.size, out.size, float("-inf"), float("inf")))
    return QualityReport(tuple(results))


def check_quality(report: QualityReport, bounds: QualityBounds) -> None:
    """Raise :class:`QualityGateError` unless every sentence is within ``bounds``."""
    problems: list[str] = []
    changed = [s for s in report.sentences if not s.same_duration]
    if changed:
        first = changed[0]
        problems.append(f"durations differ on {len(changed)} sentence(s), e.g. {first.text!r}: "
                        f"{first.samples_int8} samples instead of {first.samples_fp32}")
    same = [s for s in report.sentences if s.same_duration]
    low = [s.spectral_snr_db for s in same if not s.spectral_snr_db >= bounds.min_spectral_snr_db]
    if low:
        problems.append(f"spectral SNR below {bounds.min_spectral_snr_db} dB on {len(low)} "
                        f"sentence(s) (worst {min(low):.1f} dB)")
    far = [s.mel_distance_db for s in same if not s.mel_distance_db <= bounds.max_mel_distance_db]
    if far:
        problems.append(f"mel distance above {bounds.max_mel_distance_db} dB on {len(far)} "
                        f"sentence(s) (worst {max(far):.1f} dB)")
    if problems:
        raise QualityGateError("int8 model rejected: " + "; ".join(problems), report)


# --- the bundle ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Origin:
    voice: str
    version: str
    source: str


def _origin(onnx_path: Path, version: str | None, source: str | None) -> _Origin:
    """Voice name, version and source: from the manifest beside the model when it has one."""
    voice = onnx_path.name.removesuffix(".onnx")
    try:
        manifest = read_manifest(onnx_path.parent)
    except BundleError:
        manifest = {}
    if manifest.get("variants", {}).get("fp32") == onnx_path.name:
        verify_bundle(onnx_path.parent)  # never quantize a damaged model
        return _Origin(str(manifest["voice"]), version or str(manifest["version"]),
                       source or str(manifest.get("source", "local")))
    return _Origin(voice, version or "1.0.0", source or "local")


def build_int8_bundle(
    onnx_path: Path,
    out_dir: Path,
    *,
    calibration: Sequence[str],
    heldout: Sequence[str],
    recipe: Recipe = DEFAULT_RECIPE,
    bounds: QualityBounds = DEFAULT_BOUNDS,
    version: str | None = None,
    source: str | None = None,
    threads: int = 1,
) -> tuple[Bundle, QualityReport]:
    """Quantize a Piper voice and write ``out_dir`` as a bundle with ``fp32`` and ``int8``.

    ``onnx_path`` is the fp32 voice (its ``.onnx.json`` beside it); when it sits in a bundle,
    that bundle is verified first and its version and source are carried over. Everything is
    built in a hidden sibling directory and renamed into place only after the quality gate
    passed, so ``out_dir`` (which may be the input's own bundle) is never half-written.
    Raises :class:`QualityGateError` (nothing written) or :class:`QuantizeError`.
    """
    from agent.text.frontend import Frontend
    from agent.voice.voice import VoiceConfig, VoiceLoadError

    config_path = onnx_path.with_name(onnx_path.name + ".json")
    for path in (onnx_path, config_path):
        if not path.is_file():
            raise QuantizeError(f"not a file: {path}")
    if set(calibration) & set(heldout):
        raise QuantizeError("calibration and held-out sentences overlap")
    try:
        origin = _origin(onnx_path, version, source)
        config = VoiceConfig.from_file(config_path)
    except (BundleError, VoiceLoadError) as exc:
        raise QuantizeError(str(exc)) from exc
    frontend = Frontend(config.espeak_voice, config.phoneme_id_map)
    # Noise scales 0: the model is deterministic, so the same sentences give the same ranges.
    scales = (0.0, config.length_scale, 0.0)
    calib = sentence_feeds(frontend, calibration, scales)
    judge = sentence_feeds(frontend, heldout, scales)

    out_dir = out_dir.absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{origin.voice}-quant-", dir=out_dir.parent))
    try:
        fp32_name, int8_name = onnx_path.name, origin.voice + INT8_SUFFIX
        shutil.copyfile(onnx_path, staging / fp32_name)
        shutil.copyfile(config_path, staging / config_path.name)
        facts = quantize_model(staging / fp32_name, staging / int8_name,
                               CalibrationReader([f for _, f in calib]), recipe)
        report = _gate(staging / fp32_name, staging / int8_name, judge,
                       sample_rate=config.sample_rate, bounds=bounds, threads=threads)
        extra = {"quantization": {
            "recipe": recipe.to_json(),
            "calibration": {"sentences": len(calibration), "inputs": len(calib),
                            "sha256": sentences_sha256(calibration)},
            "heldout": {"sentences": len(heldout), "sha256": sentences_sha256(heldout)},
            "quality": report.to_json(),
            "bounds": bounds.to_json(),
            "onnxruntime": _onnxruntime_version(),
            **facts,
        }}
        write_manifest(staging, voice=origin.voice, version=origin.version,
                       sample_rate=config.sample_rate,
                       variants={"fp32": fp32_name, "int8": int8_name},
                       config=config_path.name, source=origin.source, extra=extra)
        staging.chmod(0o755)
        _replace_dir(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("int8_bundle_written", voice=origin.voice, dir=str(out_dir), recipe=recipe.name,
             **report.to_json()["mel_distance_db"])
    return verify_bundle(out_dir), report


def _gate(fp32: Path, int8: Path, heldout: Sequence[tuple[str, Feeds]], *, sample_rate: int,
          bounds: QualityBounds, threads: int) -> QualityReport:
    from agent.voice.onnx_session import RuntimeOptions, create_session

    runtime = RuntimeOptions(intra_op_threads=threads)
    reference, _ = create_session(fp32, runtime)
    candidate, _ = create_session(int8, runtime)
    report = measure_quality(lambda f: reference.run(None, f)[0],
                             lambda f: candidate.run(None, f)[0], heldout, sample_rate)
    log.info("quality_gate", **{k: v for k, v in report.to_json().items() if k != "sentences"})
    check_quality(report, bounds)
    return report


def _replace_dir(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``, moving an existing ``target`` out of the way first."""
    if not target.exists():
        staging.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
    target.rename(old / target.name)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _onnxruntime_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


def manifest_quantization(bundle_dir: Path) -> dict[str, Any] | None:
    """The ``quantization`` record of a bundle's manifest (``None`` when it has none)."""
    value = read_manifest(bundle_dir).get("quantization")
    return value if isinstance(value, dict) else None
