"""What the streaming, window and cache choices cost and buy, on the real voice (int8).

    .venv/bin/python bench/streaming_memory.py [--threads 1,2] [--reps 2] [--json PATH]

Every figure comes from a fresh Python process, so memory peaks never mix:

* **windows**: streaming off, streaming with 400-frame windows, and the default (64-frame
  windows), at each thread count: median real-time factor over the held-out sentences (each its
  own request, so each first sentence streams), first audio of the 3-sentence paragraph
  (median of 5), peak RSS after load and after the paragraph and the longest sentence;
* **start-up**, optimised-model cache warm: the cost of each step up to a warm voice (imports of
  numpy, onnxruntime and ``agent.voice.voice``, byte-compiled as ``pip install`` leaves them; the
  sha256 check; the session from the cache; the warm-up), RSS after the imports and after the
  load, and the check and the session together as ``Voice.load`` runs them (hashing on a second
  thread while onnxruntime builds the session);
* **cache format**: building the session from the cache with the weights in a data file of
  their own (shipped) and inside the graph, and RSS at load (``--child`` patches
  ``agent.voice.onnx_session._EXTERNAL_MIN_BYTES`` for the second);
* **first load** (empty cache): load time and peak RSS while the switchable graph is built.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import daemon_startup
from results import Figures, add_json_option, write_result
from workload import BUNDLE, HELDOUT, PARAGRAPH, ROOT, read_lines, status_kib

sys.path.insert(0, str(ROOT))
WINDOWS = {"streaming off": {"stream_first_frames": 0},
           "400-frame windows": {"stream_max_window_frames": 400},
           "64-frame windows (default)": {}}


def status_mib(field: str) -> float:
    return status_kib(field) / 1024


def lines() -> list[str]:
    return read_lines(HELDOUT)


def child_windows(cache: Path, threads: int, setting: str, reps: int) -> dict[str, Any]:
    from agent.hardware.runtime import RuntimeOptions
    from agent.logs import configure_logging
    from agent.voice.options import VoiceOptions
    from agent.voice.voice import Voice

    configure_logging("error")
    runtime = RuntimeOptions(intra_op_threads=threads, optimized_cache_dir=cache)
    voice = Voice.load(BUNDLE, VoiceOptions(variant="int8", phoneme_cache_size=0, runtime=runtime,
                                            **WINDOWS[setting]))
    loaded = status_mib("VmHWM")
    first = []
    for _ in range(5):
        time.sleep(0.05)
        started = time.perf_counter()
        next(voice.synthesize(PARAGRAPH))
        first.append(time.perf_counter() - started)
    list(voice.synthesize(PARAGRAPH))
    list(voice.synthesize(max(lines(), key=len)))
    peak = status_mib("VmHWM")
    rtf = []
    for _ in range(reps):
        for text in lines():
            time.sleep(0.02)
            started = time.perf_counter()
            seconds = sum(chunk.seconds for chunk in voice.synthesize(text))
            rtf.append((time.perf_counter() - started) / seconds)
    return {"rtf": statistics.median(rtf), "first_audio_s": statistics.median(first),
            "rss_loaded_mib": loaded, "rss_peak_mib": peak}


def child_startup(cache: Path, inline_weights: bool, overlap: bool = False) -> dict[str, Any]:
    steps: dict[str, float] = {}
    started = time.perf_counter()
    import numpy  # noqa: F401

    steps["import numpy"] = time.perf_counter() - started
    mark = time.perf_counter()
    import onnxruntime  # noqa: F401

    steps["import onnxruntime"] = time.perf_counter() - mark
    mark = time.perf_counter()
    from agent.hardware.runtime import RuntimeOptions
    from agent.logs import configure_logging
    from agent.voice import onnx_session
    from agent.voice.bundle import verify_bundle
    from agent.voice.options import VoiceOptions
    from agent.voice.voice import Voice

    steps["import agent.voice.voice"] = time.perf_counter() - mark
    rss_imports = status_mib("VmRSS")
    configure_logging("error")
    if inline_weights:
        onnx_session._EXTERNAL_MIN_BYTES = 1 << 40  # every weight inside the cached graph
    options = VoiceOptions(variant="int8", runtime=RuntimeOptions(optimized_cache_dir=cache))
    mark = time.perf_counter()
    if overlap:  # as shipped: Voice.load hashes while onnxruntime builds the session
        voice = Voice.load(BUNDLE, options)
        steps["sha256 check + session (together)"] = time.perf_counter() - mark - voice.warmup_s
    else:
        bundle = verify_bundle(BUNDLE, "int8")
        steps["sha256 check"] = time.perf_counter() - mark
        mark = time.perf_counter()
        voice = Voice(bundle, options)
        steps["session from the cache"] = time.perf_counter() - mark - voice.warmup_s
    steps["warm-up"] = voice.warmup_s
    return {"steps_s": steps, "rss_imports_mib": rss_imports,
            "rss_loaded_mib": status_mib("VmRSS"), "rss_peak_mib": status_mib("VmHWM")}


def run_child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma list (default 1,2)")
    parser.add_argument("--reps", type=int, default=2, help="passes over the sentences")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    add_json_option(parser, "streaming_memory")
    args = parser.parse_args()
    if args.child:
        kind, cache, *rest = args.child
        result = (child_windows(Path(cache), int(rest[0]), rest[1], args.reps)
                  if kind == "windows" else child_startup(Path(cache), rest[0] == "inline",
                                                          rest[0] == "overlap"))
        print(json.dumps(result))
        return 0
    daemon_startup.byte_compile()  # as pip install leaves the agent on a device
    with tempfile.TemporaryDirectory(prefix="tts-bench-stream-") as tmp:
        fresh, warm, inline = Path(tmp) / "fresh", Path(tmp) / "warm", Path(tmp) / "inline"
        first = run_child("startup", str(fresh), "data-file")
        print(f"first load (empty cache, builds the switchable graph): "
              f"{first['steps_s']['session from the cache']:.2f} s, "
              f"peak RSS {first['rss_peak_mib']:.0f} MiB")
        run_child("startup", str(warm), "data-file")  # fills the caches
        run_child("startup", str(inline), "inline")
        run_child("windows", str(warm), "1", "streaming off")  # caches the whole graph too
        runs = {"first": first, "shipped": run_child("startup", str(warm), "data-file"),
                "inside": run_child("startup", str(inline), "inline"),
                "together": run_child("startup", str(warm), "overlap")}
        print_startup(runs)
        print(f"\n{'setting':<28} {'threads':>7} {'1/RTF':>7} {'first audio':>12} "
              f"{'RSS loaded':>11} {'peak RSS':>9}")
        windows = []
        for threads in (int(t) for t in args.threads.split(",")):
            for setting in WINDOWS:
                row = run_child("windows", str(warm), str(threads), setting)
                windows.append((threads, setting, row))
                print(f"{setting:<28} {threads:>7} {1 / row['rtf']:>6.1f}x "
                      f"{row['first_audio_s'] * 1000:>9.0f} ms {row['rss_loaded_mib']:>7.0f} MiB "
                      f"{row['rss_peak_mib']:>5.0f} MiB")
    write_result("streaming_memory", record(runs, windows), args,
                 raw={**runs, "windows": [{"threads": t, "setting": s, **row}
                                          for t, s, row in windows]})
    return 0


TOGETHER = "sha256 check + session (together)"


def print_startup(runs: dict[str, dict[str, Any]]) -> None:
    """The warm start-up steps, the overlapped check and session, and the two cache formats."""
    shipped, inside, together = runs["shipped"], runs["inside"], runs["together"]
    print("\nstart-up, cache warm (one process):")
    for step, seconds in shipped["steps_s"].items():
        print(f"  {step:<24} {seconds * 1000:6.0f} ms")
    print(f"  as Voice.load does it, hashing while the session builds: {TOGETHER} "
          f"{together['steps_s'][TOGETHER] * 1000:.0f} ms")
    print(f"  RSS after the imports {shipped['rss_imports_mib']:.0f} MiB, "
          f"after the load {shipped['rss_loaded_mib']:.0f} MiB")
    build = {n: r["steps_s"]["session from the cache"] for n, r in
             (("data file", shipped), ("inside", inside))}
    print(f"\ncached weights in a data file of their own / inside the graph: session "
          f"{build['data file'] * 1000:.0f} / {build['inside'] * 1000:.0f} ms, RSS at load "
          f"{shipped['rss_loaded_mib']:.0f} / {inside['rss_loaded_mib']:.0f} MiB")


def record(runs: dict[str, dict[str, Any]],
           windows: list[tuple[int, str, dict[str, Any]]]) -> Figures:
    """Start-up steps, cache formats, first load and the window settings, as figures."""
    figures = Figures()
    shipped, inside, first = runs["shipped"], runs["inside"], runs["first"]
    steps = {**shipped["steps_s"], TOGETHER: runs["together"]["steps_s"][TOGETHER]}
    figures.table("Start-up with the optimised-model cache warm, step by step", ["step", "time"], [
        [step, figures.add(f"startup.step_{n}", seconds * 1000, "ms",
                           f"{step}, one fresh process (the last: as Voice.load runs them)")]
        for n, (step, seconds) in enumerate(steps.items())])
    session = "session from the cache"
    figures.table("Where the cached weights live", ["", "session", "RSS at load"], [
        ["in a data file of their own (shipped)",
         figures.add("cache.data_file.session", shipped["steps_s"][session] * 1000, "ms",
                     "session from the cache, weights in a data file"),
         figures.add("cache.data_file.rss", shipped["rss_loaded_mib"], "MiB", "RSS after load")],
        ["inside the graph",
         figures.add("cache.inside.session", inside["steps_s"][session] * 1000, "ms",
                     "session from the cache, weights inside the graph"),
         figures.add("cache.inside.rss", inside["rss_loaded_mib"], "MiB", "RSS after load")]])
    figures.add("startup.rss_imports", shipped["rss_imports_mib"], "MiB", "RSS after the imports")
    figures.add("first_load.session", first["steps_s"][session], "s",
                "first load with an empty cache (builds the switchable graph)")
    figures.add("first_load.rss_peak", first["rss_peak_mib"], "MiB", "peak RSS of the first load")
    rows: list[list[str | None]] = []
    for threads, setting, row in windows:
        key = f"windows.{threads}.{list(WINDOWS).index(setting)}"
        label = f"{setting}, {threads} thr"
        rows.append([label,
                     figures.add(f"{key}.speed", 1 / row["rtf"], "x",
                                 f"{label}: audio s per s of compute, median over sentences"),
                     figures.add(f"{key}.first_audio", row["first_audio_s"] * 1000, "ms",
                                 f"{label}: first audio of the paragraph, median of 5"),
                     figures.add(f"{key}.rss_loaded", row["rss_loaded_mib"], "MiB",
                                 f"{label}: peak RSS after load"),
                     figures.add(f"{key}.rss_peak", row["rss_peak_mib"], "MiB",
                                 f"{label}: peak RSS after the paragraph and longest sentence")])
    figures.table("Streaming windows (int8)", ["setting", "1/RTF", "first audio", "RSS loaded",
                                               "peak RSS"], rows)
    return figures


if __name__ == "__main__":
    sys.exit(main())
