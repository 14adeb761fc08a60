"""Synthesis speed levers, each side by side with piper-tts and our default in one run.

    .venv/bin/python bench/synth_levers.py [--quick] [--runs 2] [--reps 2] [--json PATH]

For 1 and 2 onnxruntime threads, every lever is our int8 voice loaded with one setting changed
from the default (``compare_piper.py``'s engine: streaming on, phonemization cache off, the
optimised-model cache in a fresh directory), next to piper-tts on the same voice with the same
thread count. Each pass says every sentence of the quality gate's held-out set with every
engine, the engines' order rotating from sentence to sentence, after a 50 ms pause each
(``compare_piper.SETTLE_S``); speed is audio seconds per second of compute, text to audio,
median over the sentences. ``--runs`` passes, each reported alone (the machine is shared: a
lever that helps shows in every pass) and the median of the passes' ratios. The load average
is recorded before and after each pass. Each lever's audio at noise scales 0 is compared with
the default's on one sentence (largest sample difference; 0 = the same audio).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from compare_piper import CACHE_ENV, SETTLE_S, Synth, piper, resolve
from results import Figures, add_json_option, write_result
from workload import HELDOUT, ROOT, read_lines

sys.path.insert(0, str(ROOT))

Change = Callable[[Any], dict[str, Any]]
"""The default VoiceOptions -> the fields this lever changes (``runtime`` replaced whole)."""


def _runtime(**fields: Any) -> Change:
    return lambda options: {"runtime": replace(options.runtime, **fields)}


LEVERS: dict[str, tuple[str, Change, tuple[int, ...]]] = {
    "default": ("the default: one window at a time, spinning on", lambda options: {}, (1, 2)),
    "spin0": ("intra-op spinning off", _runtime(allow_spinning=False), (2,)),
    "pinned": ("threads pinned to CPUs 0-1", _runtime(affinity_cpus=(0, 1)), (2,)),
    "arena0": ("CPU memory arena off", _runtime(enable_cpu_mem_arena=False), (1, 2)),
    "parallel": ("execution_mode parallel", _runtime(execution_mode="parallel"), (1, 2)),
    "extended": ("graph optimisation extended (no layout)",
                 _runtime(graph_optimization="extended"), (1, 2)),
    "no_nchwc": ("NCHWc layout transformer disabled", _runtime(config_entries=(
        ("optimization.disable_specified_optimizers", "NchwcTransformer"),)), (1, 2)),
    "no_cache": ("optimised-model cache off (optimised at each load)",
                 _runtime(optimized_cache_dir=None), (1, 2)),
    "win32": ("windows of at most 32 frames", lambda o: {"stream_max_window_frames": 32}, (2,)),
    "win128": ("windows of at most 128 frames", lambda o: {"stream_max_window_frames": 128},
               (1, 2)),
    "whole": ("streaming off (sentences decoded whole)", lambda o: {"stream_first_frames": 0},
              (1, 2)),
    "workers2": ("2 decoder windows at once", _runtime(decode_workers=2), (2,)),
    "workers2_spin0": ("2 windows at once, spinning off (for a busy host; no profile ships it)",
                       _runtime(decode_workers=2, allow_spinning=False), (2,)),
}
"""Lever -> (what it is, what it changes, the thread counts it is measured at)."""
PIPERS = {"piper": "piper-tts", "piper_spin0": "piper-tts, spinning off"}


def lever_voice(bundle_dir: Path, threads: int, change: Change) -> Any:
    """Our int8 voice with ``compare_piper.our_voice``'s options, ``change`` applied."""
    from agent.hardware.runtime import RuntimeOptions
    from agent.voice.options import TextOptions, VoiceOptions
    from agent.voice.voice import Voice

    runtime = RuntimeOptions(intra_op_threads=threads,
                             optimized_cache_dir=Path(os.environ[CACHE_ENV]) / "ort")
    base = VoiceOptions(variant="int8", phoneme_cache_size=0, runtime=runtime,
                        text=TextOptions())
    return Voice.load(bundle_dir, replace(base, **change(base)))


def synth_of(voice: Any, params: Any = None) -> Synth:
    def synth(text: str) -> Any:
        for chunk in voice.synthesize(text, params):
            yield chunk.samples().reshape(-1).astype(np.float32) / 32768.0
    return synth


def one_pass(engines: dict[str, Synth], sentences: list[str], reps: int,
             rate: int) -> dict[str, float]:
    """Median speed (x real time) of each engine, sentences interleaved, order rotating."""
    speeds: dict[str, list[float]] = {name: [] for name in engines}
    order = list(engines)
    for rep in range(reps):
        for k, text in enumerate(sentences):
            shift = (k * 5 + rep) % len(order)
            for name in order[shift:] + order[:shift]:
                time.sleep(SETTLE_S)
                started = time.perf_counter()
                audio = np.concatenate(list(engines[name](text)))
                speeds[name].append(audio.size / rate / (time.perf_counter() - started))
    return {name: statistics.median(values) for name, values in speeds.items()}


def measure(threads: int, bundle_dir: Path, args: argparse.Namespace,
            sentences: list[str], rate: int) -> dict[str, Any]:
    """Every lever at ``threads`` with piper-tts: per pass speeds, loads and audio checks."""
    from agent.voice.voice import SynthesisParams

    names = [n for n, (_, _, at) in LEVERS.items()
             if threads in at and (n == "default" or not args.levers or n in args.levers)]
    voices = {n: lever_voice(bundle_dir, threads, LEVERS[n][1]) for n in names}
    quiet = SynthesisParams(noise_scale=0.0, noise_w=0.0)
    probe = max(sentences, key=len)
    reference = np.concatenate(list(synth_of(voices["default"], quiet)(probe)))
    diff = {}
    for name, voice in voices.items():
        audio = np.concatenate(list(synth_of(voice, quiet)(probe)))
        diff[name] = (float(np.max(np.abs(audio - reference))) if audio.size == reference.size
                      else float("inf"))
    engines = {n: synth_of(v) for n, v in voices.items()}
    engines["piper"] = piper(bundle_dir, threads)
    if threads > 1:  # piper-tts as compare_piper runs it keeps onnxruntime's spinning on
        engines["piper_spin0"] = piper(bundle_dir, threads, spinning=False)
    for synth in engines.values():
        list(synth("Welcome."))
    passes = []
    for _ in range(args.runs):
        before = os.getloadavg()
        speeds = one_pass(engines, sentences, args.reps, rate)
        passes.append({"speed": speeds, "load_before": before, "load_after": os.getloadavg()})
    return {"levers": names, "passes": passes, "diff": diff}


def report(results: dict[str, Any], figures: Figures) -> None:
    """Per thread count: a table of each lever's speed, ratio to piper-tts and to the default,
    per pass and as the median of the passes."""
    for group, data in results.items():
        threads = int(group.removeprefix("threads_"))
        passes = data["passes"]
        columns = ["lever", *(f"pass {p + 1} vs piper" for p in range(len(passes))),
                   "median vs piper", "median vs default", "speed (pass 1)", "audio diff"]
        rows = []
        for name in [*data["levers"], *(n for n in PIPERS if n in passes[0]["speed"])]:
            key = f"t{threads}.{name}"
            label = LEVERS[name][0] if name in LEVERS else PIPERS[name]
            vs_piper = [p["speed"][name] / p["speed"]["piper"] for p in passes]
            vs_default = [p["speed"][name] / p["speed"]["default"] for p in passes]
            cells: list[str | None] = [label]
            cells += [figures.add(f"{key}.pass{p + 1}_vs_piper", r, "x",
                                  f"{label}, {threads} thread(s): speed / piper-tts's, "
                                  f"pass {p + 1}") for p, r in enumerate(vs_piper)]
            cells.append(figures.add(f"{key}.vs_piper", statistics.median(vs_piper), "x",
                                     f"{label}, {threads} thread(s): median over passes of "
                                     "speed / piper-tts's"))
            cells.append(figures.add(f"{key}.vs_default", statistics.median(vs_default), "x",
                                     f"{label}, {threads} thread(s): median over passes of "
                                     "speed / our default's"))
            cells.append(figures.add(f"{key}.speed", passes[0]["speed"][name], "x",
                                     f"{label}, {threads} thread(s): audio s per s, pass 1"))
            cells.append(figures.add(f"{key}.diff", data["diff"][name], "",
                                     f"{label}: largest sample difference from the default's "
                                     "audio, noise scales 0") if name in data["diff"] else None)
            rows.append(cells)
        loads = "; ".join(f"pass {p + 1} load {x['load_before'][0]:.1f} -> "
                          f"{x['load_after'][0]:.1f}" for p, x in enumerate(passes))
        figures.table(f"Synthesis levers, {threads} onnxruntime thread(s), int8 voice",
                      columns, rows, note=f"1-minute load average ({os.cpu_count()} CPUs): "
                      f"{loads}. Audio diff: on the longest sentence at noise scales 0.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--runs", type=int, default=2, help="passes, each reported")
    parser.add_argument("--reps", type=int, default=2, help="times each pass says each sentence")
    parser.add_argument("--sentences", type=int, default=None,
                        help="the first N held-out sentences (default all)")
    parser.add_argument("--levers", type=lambda v: v.split(","), default=[],
                        help="comma-separated levers to run (default all; the default always)")
    parser.add_argument("--threads", type=lambda v: [int(t) for t in v.split(",")],
                        default=[1, 2], help="thread counts (default 1,2)")
    parser.add_argument("--quick", action="store_true", help="3 sentences, 1 rep: a check")
    add_json_option(parser, "synth_levers")
    args = parser.parse_args()
    from agent.logs import configure_logging
    from agent.voice.voice import VoiceConfig

    configure_logging("warning")
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="tts-bench-cache-")
    bundle_dir = resolve(args.models_dir)
    rate = VoiceConfig.from_file(next(bundle_dir.glob("*.onnx.json"))).sample_rate
    sentences = read_lines(HELDOUT)[:args.sentences]
    if args.quick:
        sentences, args.reps = sentences[:3], 1
    results = {f"threads_{t}": measure(t, bundle_dir, args, sentences, rate)
               for t in args.threads}
    figures = Figures()
    report(results, figures)
    for table in figures.tables:
        print(f"\n{table['title']}")
        for row in table["rows"]:
            print("  " + " | ".join(str(row[0]) if k == 0 else
                                    f"{figures.figures[c]['value']}" if c else "-"
                                    for k, c in enumerate(row)))
    write_result("synth_levers", figures, args, raw=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
