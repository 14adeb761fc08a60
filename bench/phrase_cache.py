"""A cached phrase's first audio with the phrase cache's exact-request index, and with it
bypassed (the request phonemized to find its entry), side by side in one run.

    .venv/bin/python bench/phrase_cache.py [--variant int8] [--reps 201] [--json PATH]

The measurement of ``bench/compare_piper.py``'s "first audio, repeated phrase (our cache)": our
voice as that bench loads it (its phoneme cache off, the default ``[text]`` stages: the
normalizer on), its repeated announcement said once, then the time until the first chunk of it
again from the phrase cache (``cached_synthesis``). Three ways, interleaved so that machine load
hits them alike: the exact-request index on (the agent's default: the request is looked up as
it came); the index bypassed (``PhraseCache(exact_index=False)``: normalizer, lexicon, espeak-ng
and the phoneme ids build the key, as every hit did before the index); bypassed with the
frontend's phoneme cache on (``synthesis.phoneme_cache_size``'s default, so espeak-ng is skipped
on a repeat but the text is still cleaned, grouped and keyed). Medians, and each bypass's ratio
to the index.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compare_piper import CACHE_ENV, REPEATED, our_voice, resolve
from results import ROOT, Figures, add_json_option, write_result

sys.path.insert(0, str(ROOT))

MODES = {
    "exact": "exact-request index (default)",
    "phonemized": "index bypassed: phonemized to find the entry",
    "phonemized_memo": "index bypassed, phoneme cache on",
}


def measure(bundle_dir: Path, variant: str, reps: int) -> dict[str, list[float]]:
    """Seconds to the first chunk of the repeated phrase, ``reps`` times per mode."""
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import SynthesisParams

    root = Path(os.environ[CACHE_ENV]) / "phrases"
    voice = our_voice(bundle_dir, variant, 1)
    memo = _with_phoneme_cache(voice)
    runs = {"exact": (PhraseCache(root, 64 << 20), voice),
            "phonemized": (PhraseCache(root, 64 << 20, exact_index=False), voice),
            "phonemized_memo": (PhraseCache(root, 64 << 20, exact_index=False), memo)}
    for cache, speaker in runs.values():  # said once before: stored, recorded, memoised
        for _ in range(2):
            list(cached_synthesis(cache, speaker, REPEATED, SynthesisParams()))
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(reps):
        for mode, (cache, speaker) in runs.items():
            started = time.perf_counter()
            next(cached_synthesis(cache, speaker, REPEATED, SynthesisParams()))
            samples[mode].append(time.perf_counter() - started)
    for mode, (cache, _) in runs.items():  # each timed lookup took the path it stands for
        stats = cache.stats()
        if stats["exact_hits"] != (reps + 1 if mode == "exact" else 0) or \
                stats["hits"] < reps + 1:
            raise SystemExit(f"{mode}: not the path it measures: {stats}")
    return samples


def _with_phoneme_cache(voice: Any) -> Any:
    """``voice`` with a frontend of its own whose phoneme cache is on (the daemon's default)."""
    import copy

    from agent.voice.voice import build_frontend

    other = copy.copy(voice)
    other.frontend = build_frontend(voice.config, voice.options, cache_size=1024)
    return other


def record(samples: dict[str, list[float]]) -> Figures:
    figures = Figures()
    exact = statistics.median(samples["exact"])
    rows: list[list[str | None]] = []
    for mode, label in MODES.items():
        median = statistics.median(samples[mode])
        ratio = None if mode == "exact" else figures.add(
            f"{mode}.vs_exact", median / exact, "x",
            f"{label}: its median over the index's, same run")
        rows.append([label, figures.add(f"{mode}.median_ms", median * 1000, "ms",
                                        f"{label}: first audio of a cached phrase, median"),
                     ratio, figures.add(f"{mode}.n", len(samples[mode]), "",
                                        f"{label}: timed lookups")])
    figures.table("A cached phrase's first audio", ["lookup", "median", "vs the index", "n"],
                  rows, note="Until the first chunk of the repeated announcement comes from the "
                             "phrase cache, the three ways interleaved in one process.")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--variant", default="int8", help="our shipped variant (default int8)")
    parser.add_argument("--reps", type=int, default=201, help="timed lookups per way")
    add_json_option(parser, "phrase_cache")
    args = parser.parse_args(argv)
    from agent.logs import configure_logging

    configure_logging("warning")
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="tts-bench-cache-")
    samples = measure(resolve(args.models_dir), args.variant, args.reps)
    figures = record(samples)
    for mode, label in MODES.items():
        print(f"{label}: {statistics.median(samples[mode]) * 1000:.3f} ms")
    write_result("phrase_cache", figures, args, raw={m: sorted(v) for m, v in samples.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
