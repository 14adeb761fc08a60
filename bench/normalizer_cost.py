"""What the text normalizer (``agent.text.normalize``) costs the daemon: import and first call in
fresh processes, the memory it adds to a process that already holds the daemon's modules, and
the time it takes per sentence.

    .venv/bin/python bench/normalizer_cost.py [--runs 7] [--repeats 20] [--json PATH]

Each run is a fresh process that first imports what the daemon holds besides the normalizer
(numpy, onnxruntime, pydantic-settings, structlog, paho-mqtt, the agent's settings and its
espeak-ng binding; the daemon's voice frontend imports the normalizer, so it cannot come
first), then times importing the normalizer (num2words with it), building a ``Normalizer`` and
normalizing its first sentence (wall clock, and the process's CPU time, which other load on
the machine moves less: on a busy machine the wall clock is mostly waiting), and reads
``VmRSS`` before and after. The same is measured in a bare interpreter (the normalizer
alone); num2words imports every language it has, which is most of the import. Time per
sentence: every input of ``bench/corpus/announcements.tsv`` normalized ``--repeats`` times in
one warm process; the median and 95th percentile over the inputs of each input's median. Our
package is byte-compiled first, as ``pip install`` leaves it on a device.
"""

from __future__ import annotations

import argparse
import compileall
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from results import ROOT, Figures, add_json_option, write_result

CORPUS = ROOT / "bench" / "corpus" / "announcements.tsv"
FIRST = "Tickets for the 7:15 to Boston are $12.50; call 555-0123 before 2026-12-01."
_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
if sys.argv[2] == "daemon":  # what the daemon holds besides the normalizer
    import numpy, onnxruntime, pydantic_settings, structlog, paho.mqtt.client
    import agent.settings, agent.text.espeak
    assert "agent.text.normalize" not in sys.modules
before = rss()
start, cpu_start = time.perf_counter(), time.process_time()
from agent.text.normalize import Normalizer
imported = time.perf_counter()
normalizer = Normalizer()
normalizer(sys.argv[3])
done, cpu_done = time.perf_counter(), time.process_time()
print(json.dumps({"import_s": imported - start, "first_call_s": done - imported,
                  "total_s": done - start, "cpu_s": cpu_done - cpu_start,
                  "rss_added_kib": rss() - before}))
"""


def fresh(kind: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), kind, FIRST],
                          capture_output=True, text=True, check=True, timeout=300, cwd=ROOT)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def inputs() -> list[str]:
    rows = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            rows.append(line.split("\t")[1])
    return rows


def per_sentence(repeats: int) -> list[float]:
    """Each input's median seconds over ``repeats`` calls, in this (warm) process."""
    sys.path.insert(0, str(ROOT))
    from agent.text.normalize import Normalizer

    normalizer = Normalizer()
    medians = []
    for text in inputs():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            normalizer(text)
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return medians


def record(runs: dict[str, list[dict[str, float]]], sentences: list[float]) -> Figures:
    figures = Figures()
    rows: list[list[str | None]] = []
    labels = {"daemon": "after the daemon's modules", "bare": "in a bare interpreter"}
    for kind, results in runs.items():
        row: list[str | None] = [labels[kind]]
        for key, unit, what in (("import_s", "ms", "import of agent.text.normalize"),
                                ("first_call_s", "ms", "Normalizer() and its first sentence"),
                                ("total_s", "ms", "import, build and first sentence"),
                                ("cpu_s", "ms", "CPU time of import, build and first "
                                                "sentence (less moved by other load)")):
            value = statistics.median(r[key] for r in results) * 1000
            row.append(figures.add(f"{kind}.{key.removesuffix('_s')}_ms", value, unit,
                                   f"{labels[kind]}: {what}, median of {len(results)} fresh "
                                   "processes"))
        rss = statistics.median(r["rss_added_kib"] for r in results) / 1024
        row.append(figures.add(f"{kind}.rss_added_mib", rss, "MiB",
                               f"{labels[kind]}: VmRSS added by the import and first call, "
                               "median"))
        rows.append(row)
    figures.table("Normalizer: load and memory", ["process", "import", "first call",
                                                  "import + first call", "its CPU time",
                                                  "memory added"], rows,
                  note="Each figure the median over fresh processes; 'after the daemon's "
                       "modules' first imports numpy, onnxruntime, pydantic-settings, "
                       "structlog, paho-mqtt, agent.settings and agent.text.espeak.")
    ordered = sorted(sentences)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    figures.table("Normalizer: time per sentence", ["", "value"], [
        ["median", figures.add("sentence.median_us", statistics.median(sentences) * 1e6, "µs",
                               "normalize one test-set input, median over the inputs")],
        ["95th percentile", figures.add("sentence.p95_us", p95 * 1e6, "µs",
                                        "normalize one test-set input, 95th percentile")],
        ["inputs", figures.add("sentence.inputs", len(sentences), "",
                               "inputs of bench/corpus/announcements.tsv timed")],
    ], note="Each input's median over the repeats, in one warm process.")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per kind")
    parser.add_argument("--repeats", type=int, default=20, help="calls per input, warm")
    add_json_option(parser, "normalizer_cost")
    args = parser.parse_args(argv)
    compileall.compile_dir(str(ROOT / "agent"), quiet=1)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in ("daemon", "bare")}
    for _ in range(args.runs):  # interleaved, so load drifts hit both alike
        for kind, results in runs.items():
            results.append(fresh(kind))
    sentences = per_sentence(args.repeats)
    write_result("normalizer_cost", record(runs, sentences), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
