"""How a voice is quantized: the :class:`Recipe`, and :func:`quantize_model`, which applies one.

Static QDQ quantization calibrated on our own phoneme ids (:mod:`agent.quantize.sentences`), in
stages tests drive one by one; the recipe keeps the text encoder and the duration predictor fp32,
so the int8 voice keeps the fp32 timing exactly. Everything runs on the caller's thread. The
stages and how :data:`DEFAULT_RECIPE` was chosen: docs/internals.md#the-quantization-recipe.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.logs import get_logger
from agent.quantize.errors import QuantizeError
from agent.quantize.sentences import CalibrationReader

__all__ = ["DEFAULT_RECIPE", "Recipe", "quantize_model"]

log = get_logger(__name__)

CALIBRATION_CHUNK = 4
"""Calibration inputs run before their ranges are merged (bounds calibration memory)."""


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
    (:func:`agent.quantize.time_rows.fold_time_into_rows`)."""
    time_rows_block: tuple[str, ...] = ()
    """Two regular expressions: the node whose first input and the node whose output bound the
    block run on :attr:`time_rows` rows (a 2-D block, see :attr:`conv2d_blocks`)."""
    polyphase_upsamplers: tuple[str, ...] = ()
    """Regular expressions selecting 2-D ``ConvTranspose`` upsamplers rewritten as polyphase
    ``Conv`` (:func:`agent.quantize.polyphase.upsamplers_as_convs`), which can be quantized."""
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
    # and waste most of the 256 levels (bench/quant_recipes.py compares the two).
    calibration="percentile",
    calibration_options={"percentile": 99.99, "symmetric": False},
)
"""The shipped recipe for Piper (VITS) voices; ``bench/quant_recipes.py`` measures why."""


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

    from agent.quantize.layout import convs_as_2d
    from agent.quantize.polyphase import upsamplers_as_convs
    from agent.quantize.time_rows import fold_time_into_rows

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
