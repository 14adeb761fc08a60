"""``tts-agent quantize IN.onnx OUT_DIR``: build a voice bundle with an int8 variant next to fp32.

The int8 model is calibrated on phoneme ids our frontend makes of ``--calibration`` sentences and
must pass the quality gate on ``--heldout`` sentences before anything is written. Both default to
the sentence sets shipped in the package (``agent/quantize/corpus/``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from agent.commands import (
    NO_ANSWER,
    CommandError,
    UsageError,
    add_config_argument,
    settings_from_args,
)

GATE_FAILED = NO_ANSWER
"""Exit status when the int8 model was rejected by the quality gate (3: no good enough result;
nothing is written)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quantize", help="add a quality-gated int8 variant to a voice (writes an fp32+int8 bundle)")
    add_config_argument(parser)
    parser.add_argument("onnx", type=Path, metavar="IN.onnx",
                        help="the fp32 Piper voice (its .onnx.json beside it)")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR",
                        help="bundle directory to write (may be the input's own bundle)")
    parser.add_argument("--calibration", type=Path, metavar="FILE",
                        help="sentences to calibrate on, one per line (default: the shipped "
                             "calibration set)")
    parser.add_argument("--heldout", type=Path, metavar="FILE",
                        help="sentences the quality gate compares on (default: the shipped "
                             "held-out set)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="onnxruntime threads for the quality gate, 1-64 (default: 1)")
    parser.add_argument("--version", help="version for the manifest (default: the input's)")
    parser.add_argument("--source", help="source for the manifest (default: the input's)")
    parser.add_argument("--min-spectral-snr", type=float, metavar="DB",
                        help="gate: lowest spectral SNR against fp32 per sentence")
    parser.add_argument("--max-mel-distance", type=float, metavar="DB",
                        help="gate: largest log-mel distance from fp32 per sentence")
    parser.set_defaults(handler=run_quantize)


def run_quantize(args: argparse.Namespace) -> int:
    from agent.quantize.errors import QuantizeError
    from agent.quantize.gate import DEFAULT_BOUNDS, QualityBounds, QualityGateError
    from agent.quantize.int8_bundle import build_int8_bundle
    from agent.quantize.sentences import packaged_corpus, read_sentences

    settings_from_args(args)  # configures logging
    if not args.onnx.is_file():
        raise UsageError(f"{args.onnx}: no such file (the fp32 Piper voice to quantize)")
    if not 1 <= args.threads <= 64:
        raise UsageError(f"--threads must be 1-64, not {args.threads}")
    bounds = QualityBounds(
        min_spectral_snr_db=DEFAULT_BOUNDS.min_spectral_snr_db
        if args.min_spectral_snr is None else args.min_spectral_snr,
        max_mel_distance_db=DEFAULT_BOUNDS.max_mel_distance_db
        if args.max_mel_distance is None else args.max_mel_distance,
    )
    try:
        calibration = read_sentences(args.calibration or packaged_corpus("calibration"))
        heldout = read_sentences(args.heldout or packaged_corpus("heldout"))
        bundle, report = build_int8_bundle(
            args.onnx, args.out_dir, calibration=calibration, heldout=heldout, bounds=bounds,
            version=args.version, source=args.source, threads=args.threads)
    except QualityGateError as exc:
        raise CommandError(str(exc), status=GATE_FAILED) from exc
    except QuantizeError as exc:
        raise CommandError(str(exc)) from exc
    except ImportError as exc:  # a broken install (onnx is a dependency of the agent)
        raise CommandError(f"quantize needs {exc.name or 'onnx'}: pip install onnx") from exc
    except OSError as exc:
        raise CommandError(f"cannot write {args.out_dir}: {exc}") from exc
    print(json.dumps({
        "voice": bundle.voice, "dir": str(bundle.dir),
        "variants": {k: v.name for k, v in bundle.variants.items()},
        "quality": report.to_json(),
    }, indent=2))
    return 0
