"""The INT8 recipe search, rebuilt in one run: each recipe quantized and judged against fp32.

    .venv/bin/python bench/quant_recipes.py [--recipes 1,7,last] [--sentences N]
        [--calibration N] [--threads 1] [--reps 1] [--json PATH]

Every row of the recipe table (``docs/performance.md``) is a named
:class:`agent.quantize.recipe.Recipe` here (:func:`rows`, in the table's order; the last row is
:data:`agent.quantize.recipe.DEFAULT_RECIPE`).
For each recipe the fp32 voice (models/en_US-joe-medium) is quantized into a temporary directory
with :func:`agent.quantize.recipe.quantize_model`, calibrated on the shipped calibration sentences
(``agent/quantize/corpus/calibration.txt``) made into model inputs by the voice's own frontend
(:func:`agent.quantize.sentences.sentence_feeds`, noise scales 0, as ``tts-agent quantize`` does),
then judged on the shipped held-out sentences (``agent/quantize/corpus/heldout.txt``):

* speed: fp32 time / int8 time per model input, noise scales 0, both sessions (built by
  :func:`agent.voice.onnx_session.create_session`, ``--threads`` intra-op threads) run interleaved
  input by input, the order alternating; the median over the inputs (and ``--reps`` passes);
* durations: whether every held-out input gives exactly the fp32 sample count;
* spectral SNR min and log-mel distance median / max against fp32 (noise 0), as the quality gate
  measures them (:func:`agent.quantize.gate.measure_quality`);
* word error rate (pocketsphinx, ``bench/compare_piper.py``'s recogniser) of the int8 audio with
  noise scales 0 and with the voice's default noise (onnxruntime's random seed is fixed before
  each noisy session, so reruns hear the same noise); the fp32 figures once, in the header.

Recipes whose calibration is the same (same operator types, layout rewrites and calibration
method) share one calibration run: the voice is deterministic at noise 0, so the ranges would be
identical. A recipe that fails prints as a row with the error. Speed figures move with the
machine's load; quality and noise-0 word error rates are the same on every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from quant_table import record, table, table_row
from results import add_json_option, write_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VOICE = "en_US-joe-medium"
MODEL = ROOT / "models" / VOICE / f"{VOICE}.onnx"
NOISE_SEED = 20240607
"""onnxruntime's random seed, set before every session that runs with default noise."""

Feeds = dict[str, np.ndarray]
Scales = tuple[float, float, float]
Line = tuple[str, list[tuple[str, Feeds]]]
"""A held-out line and the model inputs (one per frontend sentence) it is spoken as."""

LAST_STAGE = r"^/dec/(ups\.2|resblocks\.[6-8]|conv_post)/"
STAGES_12 = r"^/dec/(conv_pre|ups\.[01]|resblocks\.[0-5])/"


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    label: str
    """The row's label in the recipe table."""
    recipe: Any
    """An :class:`agent.quantize.recipe.Recipe`."""


def rows() -> list[Row]:
    """The recipe-search rows, in the table's order (min/max calibration unless noted)."""
    from agent.quantize.recipe import DEFAULT_RECIPE

    def only(pattern: str) -> tuple[str, ...]:
        """keep_fp32 for "only the nodes matching ``pattern`` in int8"."""
        return (rf"^(?!{pattern})",)

    replace = dataclasses.replace
    # "s12": flow + decoder stages 1-2 in int8, whole decoder as 2-D convolutions, min/max.
    s12 = replace(DEFAULT_RECIPE, name="s12-dec2d", time_rows=1, time_rows_block=(),
                  polyphase_upsamplers=(), calibration="minmax", calibration_options={})
    one_d = replace(s12, conv2d_blocks=())  # no layout rewrite
    encoder_dp = DEFAULT_RECIPE.keep_fp32[:2]
    return [
        Row("everything (Conv, ConvTranspose, MatMul), per channel",
            replace(one_d, name="everything", keep_fp32=(),
                    op_types=("Conv", "ConvTranspose", "MatMul"))),
        Row("encoder + dp fp32, rest int8 (incl. decoder stage 3)",
            replace(one_d, name="enc-dp-fp32", keep_fp32=encoder_dp)),
        Row("only the decoder in int8", replace(one_d, name="dec-only", keep_fp32=only("/dec/"))),
        Row("only decoder stage 3 in int8",
            replace(one_d, name="dec3-only", keep_fp32=only(LAST_STAGE[1:]))),
        Row("only the flow in int8", replace(one_d, name="flow-only", keep_fp32=only("/flow/"))),
        Row("decoder stages 1-2 only (1-D)",
            replace(one_d, name="dec12-only-1d", keep_fp32=only(STAGES_12[1:]))),
        Row("s12, 2-D decoder", s12),
        Row("s12, 2-D, flow fp32",
            replace(s12, name="s12-dec2d-flow-fp32", keep_fp32=(*s12.keep_fp32, r"^/flow/"))),
        Row("s12, 2-D, per-tensor weights",
            replace(s12, name="s12-dec2d-per-tensor", per_channel=False)),
        Row("s12, 2-D, reduce_range", replace(s12, name="s12-dec2d-reduce-range",
                                              reduce_range=True)),
        Row("s12, 2-D, int8 (signed) activations",
            replace(s12, name="s12-dec2d-s8s8", activation_type="int8")),
        Row("s12, 2-D, + Add/LeakyRelu",
            replace(s12, name="s12-dec2d-add-leakyrelu",
                    op_types=("Conv", "MatMul", "Add", "LeakyRelu"))),
        Row("s12, 2-D, percentile 99.99 asym (the first shipped recipe)",
            replace(s12, name="s12-dec2d-p9999", calibration="percentile",
                    calibration_options={"percentile": 99.99, "symmetric": False})),
        Row("+ polyphase upsamplers, last stage in 2 rows (shipped)", DEFAULT_RECIPE),
    ]


def select(all_rows: list[Row], spec: str | None) -> list[tuple[int, Row]]:
    """The rows ``spec`` names (comma list of 1-based numbers, ``last``, recipe names or
    labels), in table order; all rows when ``spec`` is empty."""
    numbered = list(enumerate(all_rows, 1))
    if not spec:
        return numbered
    wanted: set[int] = set()
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        matches = [n for n, row in numbered
                   if item in (str(n), row.recipe.name, row.label)
                   or (item == "last" and n == len(all_rows))]
        if not matches:
            raise SystemExit(f"unknown recipe {item!r}: use 1-{len(all_rows)}, 'last', or one of "
                             + ", ".join(row.recipe.name for row in all_rows))
        wanted.update(matches)
    return [(n, row) for n, row in numbered if n in wanted]


def calibration_key(recipe: Any) -> str:
    """Names the calibration a recipe needs: everything that changes the calibrated model or
    the way its ranges are computed (not which nodes are later kept fp32, nor the int8 types)."""
    data = recipe.to_json()
    fields = ("op_types", "conv2d_blocks", "time_rows", "time_rows_block",
              "polyphase_upsamplers", "calibration", "calibration_options", "options")
    text = json.dumps({k: data[k] for k in fields}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --- measurements --------------------------------------------------------------------------


def audio(session: Any, feeds: Feeds) -> np.ndarray:
    return np.asarray(session.run(None, feeds)[0], dtype=np.float32).reshape(-1)


def timed_pass(fp32: Any, int8: Any, inputs: Sequence[Feeds],
               reps: int) -> tuple[list[float], list[np.ndarray], list[np.ndarray]]:
    """fp32 time / int8 time per input (``reps`` passes), interleaved input by input with the
    order alternating; and both models' audio of the first pass."""
    audio(int8, inputs[0])  # warm up
    ratios: list[float] = []
    out: dict[str, list[np.ndarray]] = {"fp32": [], "int8": []}
    for rep in range(reps):
        for k, feeds in enumerate(inputs):
            seconds = {}
            order = [("fp32", fp32), ("int8", int8)]
            for name, session in order if (k + rep) % 2 == 0 else order[::-1]:
                started = time.perf_counter()
                result = audio(session, feeds)
                seconds[name] = time.perf_counter() - started
                if rep == 0:
                    out[name].append(result)
            ratios.append(seconds["fp32"] / seconds["int8"])
    return ratios, out["fp32"], out["int8"]


def word_error_rate(recogniser: Any, lines: Sequence[Line], spoken: Sequence[np.ndarray],
                    rate: int) -> float:
    """Word errors / reference words; ``spoken`` holds the audio per model input, in order."""
    from compare_piper import edit_distance, words

    errors = total = 0
    pieces = iter(spoken)
    for text, feeds in lines:
        sound = np.concatenate([next(pieces) for _ in feeds])
        reference = words(text)
        errors += edit_distance(reference, words(recogniser.text(sound, rate)))
        total += len(reference)
    return errors / total


def noisy_audio(model: Path, runtime: Any, lines: Sequence[Line]) -> list[np.ndarray]:
    """Audio at the voice's default noise, from a session made right after fixing the seed."""
    import onnxruntime

    from agent.voice.onnx_session import create_session

    onnxruntime.set_seed(NOISE_SEED)
    session, _ = create_session(model, runtime)
    return [audio(session, feeds) for _, inputs in lines for _, feeds in inputs]


@dataclasses.dataclass(frozen=True, slots=True)
class Bench:
    """What every recipe is measured with."""

    calibration: list[Feeds]
    quiet: list[Line]
    """Held-out lines, noise scales 0."""
    noisy: list[Line]
    """Held-out lines, the voice's default noise scales."""
    rate: int
    runtime: Any
    fp32: Any
    recogniser: Any
    reps: int
    cache_dir: Path

    def evaluate(self, recipe: Any) -> dict[str, Any]:
        """Quantize with ``recipe`` and measure it; ``{"error": ...}`` when that fails."""
        from agent.quantize.errors import QuantizeError
        from agent.quantize.gate import measure_quality
        from agent.quantize.recipe import quantize_model
        from agent.quantize.sentences import CalibrationReader
        from agent.voice.onnx_session import create_session

        result: dict[str, Any] = {"recipe": recipe.to_json()}
        with tempfile.TemporaryDirectory(prefix="quant-recipe-") as tmp:
            int8_path = Path(tmp) / f"{VOICE}.int8.onnx"
            cache = self.cache_dir / f"{calibration_key(recipe)}.json"
            try:
                result["quantize"] = quantize_model(MODEL, int8_path,
                                                    CalibrationReader(self.calibration), recipe,
                                                    calibration_cache=cache)
                int8, _ = create_session(int8_path, self.runtime)
                inputs = [feeds for _, line in self.quiet for _, feeds in line]
                ratios, ref, out = timed_pass(self.fp32, int8, inputs, self.reps)
                del int8
                by_id = {id(feeds): (r, o) for feeds, r, o in zip(inputs, ref, out, strict=True)}
                heldout = [item for _, line in self.quiet for item in line]
                report = measure_quality(lambda f: by_id[id(f)][0], lambda f: by_id[id(f)][1],
                                         heldout, self.rate)
                noisy = noisy_audio(int8_path, self.runtime, self.noisy)
            except QuantizeError as exc:
                return {**result, "error": str(exc)}
            except Exception as exc:  # onnxruntime raises many unrelated types
                return {**result, "error": f"{type(exc).__name__}: {exc}"}
        result.update(
            speed=statistics.median(ratios),
            speed_quartiles=[float(q) for q in np.percentile(ratios, [25, 75])],
            quality=report.to_json(),
            durations_changed=sum(not s.same_duration for s in report.sentences),
            wer={"noise0": word_error_rate(self.recogniser, self.quiet, out, self.rate),
                 "default_noise": word_error_rate(self.recogniser, self.noisy, noisy, self.rate)},
        )
        return result


# --- report --------------------------------------------------------------------------------


def header(bench: Bench, fp32_wer: dict[str, float], calibration_lines: int) -> str:
    import onnxruntime

    from agent.hardware.detect import detect_hardware

    hardware = detect_hardware()
    inputs = sum(len(line) for _, line in bench.quiet)
    return (f"{VOICE} on {platform.machine()} ({hardware.cpu_model or 'unknown CPU'}), "
            f"{os.cpu_count()} CPUs; onnxruntime {onnxruntime.__version__}; "
            f"{bench.runtime.intra_op_threads} thread(s); {len(bench.quiet)} held-out sentences "
            f"({inputs} inputs) x {bench.reps}; calibration {calibration_lines} sentences "
            f"({len(bench.calibration)} inputs); WER noise 0 / default noise, fp32: "
            f"{fp32_wer['noise0'] * 100:.1f} / {fp32_wer['default_noise'] * 100:.1f} %")


# --- main ----------------------------------------------------------------------------------


def prepare(args: argparse.Namespace, cache_dir: Path) -> tuple[Bench, int]:
    """Model inputs, the fp32 session and the recogniser; and the calibration line count."""
    from compare_piper import Recogniser

    from agent.hardware.runtime import RuntimeOptions
    from agent.quantize.sentences import packaged_corpus, read_sentences, sentence_feeds
    from agent.text.frontend import Frontend
    from agent.voice.onnx_session import create_session
    from agent.voice.voice import VoiceConfig

    config = VoiceConfig.from_file(MODEL.with_name(MODEL.name + ".json"))
    frontend = Frontend(config.espeak_voice, config.phoneme_id_map)
    calibration = read_sentences(packaged_corpus("calibration"))[:args.calibration]
    heldout = read_sentences(packaged_corpus("heldout"))[:args.sentences]
    if set(calibration) & set(heldout):
        raise SystemExit("calibration and held-out sentences overlap")
    quiet: Scales = (0.0, config.length_scale, 0.0)  # as build_int8_bundle calibrates and judges
    noisy: Scales = (config.noise_scale, config.length_scale, config.noise_w)
    runtime = RuntimeOptions(intra_op_threads=args.threads)
    fp32, _ = create_session(MODEL, runtime)
    bench = Bench(
        calibration=[feeds for _, feeds in sentence_feeds(frontend, calibration, quiet)],
        quiet=[(text, sentence_feeds(frontend, [text], quiet)) for text in heldout],
        noisy=[(text, sentence_feeds(frontend, [text], noisy)) for text in heldout],
        rate=config.sample_rate, runtime=runtime, fp32=fp32, recogniser=Recogniser(),
        reps=args.reps, cache_dir=cache_dir)
    audio(fp32, bench.quiet[0][1][0][1])  # warm up
    return bench, len(calibration)


def fp32_word_error_rates(bench: Bench) -> dict[str, float]:
    quiet = [audio(bench.fp32, feeds) for _, line in bench.quiet for _, feeds in line]
    noisy = noisy_audio(MODEL, bench.runtime, bench.noisy)
    return {"noise0": word_error_rate(bench.recogniser, bench.quiet, quiet, bench.rate),
            "default_noise": word_error_rate(bench.recogniser, bench.noisy, noisy, bench.rate)}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", help="comma list of row numbers (1-based, 'last') or "
                        "recipe names; default all")
    parser.add_argument("--sentences", type=positive, help="first N held-out sentences")
    parser.add_argument("--calibration", type=positive, help="first N calibration sentences")
    parser.add_argument("--threads", type=positive, default=1, help="intra-op threads")
    parser.add_argument("--reps", type=positive, default=1, help="timing passes per recipe")
    add_json_option(parser, "quant_recipes")
    args = parser.parse_args()

    from agent.logs import configure_logging

    configure_logging("warning")
    chosen = select(rows(), args.recipes)
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="quant-recipes-cache-") as cache_dir:
        bench, calibration_lines = prepare(args, Path(cache_dir))
        fp32_wer = fp32_word_error_rates(bench)
        for number, row in chosen:
            print(f"[{time.monotonic() - started:6.0f} s] {number}. {row.label} ...",
                  file=sys.stderr, flush=True)
            results.append({"row": number, "label": row.label,
                            **bench.evaluate(row.recipe)})
            print(f"         {table_row(row.label, results[-1])}", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    title = header(bench, fp32_wer, calibration_lines)
    print(title)
    print()
    print(table(results))
    print()
    print(f"speed = fp32 time / int8 time, median over inputs; {elapsed / 60:.1f} min in all")
    report = {"header": title, "fp32_wer": fp32_wer,
              "threads": args.threads, "seconds": round(elapsed, 1), "recipes": results}
    write_result("quant_recipes", record(fp32_wer, results), args, raw=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
