"""Text normalizer candidates for announcements (issue #16) on the bench's own test set.

Measured on bench/corpus/announcements.tsv: exact-match accuracy per category, import and load
time, memory added, latency per sentence, wheels for x86_64 and aarch64, installed size.

    .venv/bin/python bench/text_normalizers.py [--nemo-python /path/to/venv/bin/python]

Candidates: WeTextProcessing's English normalizer (``tn.english.normalizer``, FSTs built on
pynini/OpenFst), NeMo text processing (``nemo_text_processing``; heavy, so it may run from its
own virtual environment, ``--nemo-python``) and num2words, which is a number-to-words building
block, not a normalizer: it is measured through the thin adapter below (``_num2words_adapter``,
written for this bench, under 60 lines) and only on the numeric categories it can cover.
Each load is a fresh process (median of ``--loads``); memory is the process's resident set
(VmRSS) after loading minus before importing. An output counts as right when, after case,
hyphens, punctuation and whitespace are normalized, it equals one of the expected readings.
A candidate that does not install or load is recorded with the reason, not left out.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results import Figures, add_json_option, write_result

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "bench" / "corpus" / "announcements.tsv"
CANDIDATES = ("wetextprocessing", "nemo", "num2words")
NUMERIC = ("cardinal", "decimal", "ordinal", "currency", "time", "year", "percent")
"""The categories the num2words adapter is measured on (a number-to-words library, no more)."""
DISTRIBUTIONS = {"wetextprocessing": "WeTextProcessing", "nemo": "nemo_text_processing",
                 "num2words": "num2words"}
NEEDS_NATIVE = {"wetextprocessing": "pynini", "nemo": "pynini", "num2words": None}
"""The distribution whose wheels decide the platforms (pure Python otherwise)."""
LABELS = {"wetextprocessing": "WeTextProcessing (English)", "nemo": "NeMo text processing",
          "num2words": "num2words + bench adapter (numeric only)"}


def read_corpus(path: Path) -> list[tuple[str, str, list[str]]]:
    """(category, input, expected readings) per line; ``#`` lines are comments."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        category, text, expected = line.split("\t")
        rows.append((category, text, [e.strip() for e in expected.split("|")]))
    return rows


def canonical(text: str) -> str:
    """Lower case; hyphens and dashes as spaces; no punctuation; one space between words."""
    text = re.sub(r"[-‐‑–—/]", " ", text.lower()).replace("'", "").replace("’", "")
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


# ---------------------------------------------------------------------------------------------
# The num2words adapter: a building block measured as such, not a normalizer.


def _num2words_adapter() -> Callable[[str], str]:
    """Numbers, money, times, years, ordinals and percent to words with num2words; the rest of
    the text is left as it is. Written for this bench only (thin on purpose)."""
    from num2words import num2words as words

    money = {"$": ("dollar", "cent"), "€": ("euro", "cent"), "£": ("pound", "pence")}

    def plural(n: int, unit: str) -> str:
        return f"{words(n)} {unit}" + ("" if n == 1 or unit == "pence" else "s")

    def currency(m: re.Match[str]) -> str:
        major, minor = money[m[1]]
        whole, cents = int(m[2].replace(",", "")), int(m[3] or 0)
        parts = ([plural(whole, major)] if whole or not cents else []) + (
            [plural(cents, minor)] if cents else [])
        return " and ".join(parts)

    def clock(m: re.Match[str]) -> str:
        hour, minute = int(m[1]), int(m[2])
        said = words(hour) + ("" if minute == 0 else f" oh {words(minute)}" if minute < 10
                              else f" {words(minute)}")
        return said + (" o'clock" if minute == 0 and not m[3] else "") + (
            f" {m[3][0]} m" if m[3] else "")

    rules: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (r"([$€£])(\d[\d,]*)(?:\.(\d\d))?", currency),
        (r"(\d[\d,]*) ?€", lambda m: plural(int(m[1].replace(",", "")), "euro")),
        (r"(\d+)¢", lambda m: plural(int(m[1]), "cent")),
        (r"\b(\d{1,2}):(\d\d)(?:\s*([ap])\.?m\.?)?", clock),
        (r"\b(\d+)\s*([ap])\.?m\b\.?", lambda m: f"{words(int(m[1]))} {m[2]} m"),
        (r"(\d+(?:\.\d+)?)%", lambda m: words(float(m[1]) if "." in m[1] else int(m[1]))
         + " percent"),
        (r"\b(\d+)(?:st|nd|rd|th)\b", lambda m: words(int(m[1]), to="ordinal")),
        (r"\b(1[1-9]\d\d|20\d\d)\b", lambda m: words(int(m[1]), to="year")),
        (r"\b\d[\d,]*\.\d+\b", lambda m: words(float(m[0].replace(",", "")))),
        (r"\b\d{1,3}(?:,\d{3})+\b|\b\d+\b", lambda m: words(int(m[0].replace(",", "")))),
    ]
    compiled = [(re.compile(pattern), rule) for pattern, rule in rules]

    def normalize(text: str) -> str:
        for pattern, rule in compiled:
            text = pattern.sub(rule, text)
        return text

    return normalize


# ---------------------------------------------------------------------------------------------
# The child: one fresh process loads one candidate (and runs the corpus when asked).


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _load(candidate: str, cache_dir: str) -> Callable[[str], str]:
    if candidate == "wetextprocessing":
        from tn.english.normalizer import Normalizer as WeText

        return WeText().normalize
    if candidate == "nemo":
        from nemo_text_processing.text_normalization.normalize import Normalizer as Nemo

        nemo = Nemo(input_case="cased", lang="en", cache_dir=cache_dir)
        return lambda text: str(nemo.normalize(text, verbose=False, punct_post_process=True))
    return _num2words_adapter()


def child(candidate: str, corpus: Path | None, cache_dir: str) -> dict[str, Any]:
    before = _rss_kib()
    start = time.perf_counter()
    normalize = _load(candidate, cache_dir)
    load_s = time.perf_counter() - start
    out: dict[str, Any] = {"load_s": load_s, "rss_added_mib": (_rss_kib() - before) / 1024}
    if corpus is not None:
        lines = []
        for category, text, _ in read_corpus(corpus):
            if candidate == "num2words" and category not in NUMERIC:
                continue
            start = time.perf_counter()
            try:
                said, error = normalize(text), None
            except Exception as exc:  # a candidate's failure is a result
                said, error = "", f"{type(exc).__name__}: {exc}"
            lines.append({"input": text, "output": said, "error": error,
                          "latency_s": time.perf_counter() - start})
        out["lines"] = lines
    return out


def run_child(python: str, candidate: str, corpus: Path | None, cache_dir: str,
              timeout: float) -> dict[str, Any]:
    """One fresh process; ``{"error": reason}`` when it fails or runs out of time."""
    command = [python, __file__, "--child", candidate, "--cache-dir", cache_dir]
    command += ["--corpus", str(corpus), "--with-corpus"] if corpus is not None else []
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"did not load within {timeout:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {last[:200]}"}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------------------------
# Packaging facts: wheels per platform and installed size.


def has_wheel(python: str, distribution: str, platform: str) -> bool | None:
    """Whether PyPI (through pip's configured indexes) has a wheel of ``distribution`` for
    ``platform`` and CPython 3.11; None when pip could not tell."""
    with tempfile.TemporaryDirectory() as target:
        command = [python, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
                   "--ignore-installed", "--only-binary=:all:", "--platform", platform,
                   "--python-version", "3.11", "--target", target, distribution]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                                  check=False)
        except subprocess.TimeoutExpired:
            return None
    if done.returncode == 0:
        return True
    return False if "No matching distribution" in done.stderr else None


SIZE_PROGRAM = r"""
import json, sys
from importlib.metadata import distribution, PackageNotFoundError
from packaging.requirements import Requirement
seen, todo, total = set(), [sys.argv[1]], 0
while todo:
    name = todo.pop().lower().replace("_", "-")
    if name in seen:
        continue
    seen.add(name)
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        continue
    total += sum(f.size or 0 for f in dist.files or [])
    for spec in dist.requires or []:
        req = Requirement(spec)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            todo.append(req.name)
print(json.dumps({"bytes": total, "distributions": sorted(seen),
                  "version": distribution(sys.argv[1]).version}))
"""


def installed_size(python: str, distribution: str) -> dict[str, Any] | None:
    """Bytes on disk of ``distribution`` and everything it requires, as installed."""
    done = subprocess.run([python, "-c", SIZE_PROGRAM, distribution], capture_output=True,
                          text=True, timeout=120, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


# ---------------------------------------------------------------------------------------------
# The parent: measure every candidate, record figures and tables.


def measure(candidate: str, python: str, corpus: Path, loads: int,
            timeout: float) -> dict[str, Any]:
    """Loads in fresh processes (the first also runs the corpus), wheels and size."""
    expected = {text: (category, readings) for category, text, readings in read_corpus(corpus)}
    with tempfile.TemporaryDirectory() as cache_dir:
        runs = [run_child(python, candidate, corpus if n == 0 else None, cache_dir, timeout)
                for n in range(loads)]
    good = [run for run in runs if "error" not in run]
    result: dict[str, Any] = {"errors": [run["error"] for run in runs if "error" in run]}
    if good:
        result["load_s"] = statistics.median(run["load_s"] for run in good)
        result["first_load_s"] = good[0]["load_s"]
        result["rss_added_mib"] = statistics.median(run["rss_added_mib"] for run in good)
    lines = runs[0].get("lines", [])
    for line in lines:
        category, readings = expected[line["input"]]
        line["category"] = category
        line["right"] = canonical(line["output"]) in {canonical(r) for r in readings}
    result["lines"] = lines
    if lines:
        result["latency_s"] = statistics.median(line["latency_s"] for line in lines)
    native = NEEDS_NATIVE[candidate] or DISTRIBUTIONS[candidate]
    result["wheels"] = {arch: has_wheel(python, native, f"manylinux2014_{arch}")
                        for arch in ("x86_64", "aarch64")}
    result["size"] = installed_size(python, DISTRIBUTIONS[candidate])
    return result


def record(figures: Figures, results: dict[str, dict[str, Any]],
           categories: list[str]) -> None:
    """Accuracy per category and overall; load, memory, latency, wheels, size per candidate."""
    acc_rows: list[list[str | None]] = [[category] for category in [*categories, "overall"]]
    for name, result in results.items():
        lines = result["lines"]
        for row in acc_rows:
            category = row[0] or ""
            mine = [line for line in lines if category in ("overall", line["category"])]
            applies = name != "num2words" or category in (*NUMERIC, "overall")
            value = 100 * sum(line["right"] for line in mine) / len(mine) if mine else None
            what = f"{LABELS[name]}: exact matches in {category}" + (
                " (numeric categories only)" if name == "num2words" and category == "overall"
                else "")
            row.append(figures.add(f"{name}.accuracy.{category}", value, "%", what)
                       if applies else None)
    figures.table("Text normalizers: exact-match accuracy by category",
                  ["category", *(LABELS[name] for name in results)], acc_rows,
                  note="Share of the inputs in bench/corpus/announcements.tsv read as one of "
                       "the expected readings (case, hyphens, punctuation, spaces normalized). "
                       "num2words is measured on the numeric categories only; its overall is "
                       "over those.")
    cost_rows: list[list[str | None]] = [
        ["version"], ["import + load (median of fresh processes)"], ["first load (builds caches)"],
        ["memory added (RSS)"], ["latency per sentence (median)"], ["wheel for x86_64"],
        ["wheel for aarch64"], ["installed size with its dependencies"], ["failures"]]
    for name, result in results.items():
        size = result["size"]["bytes"] / 2**20 if result.get("size") else None
        cells = [
            ("version", (result.get("size") or {}).get("version"), "", "the version measured"),
            ("load_s", result.get("load_s"), "s", "import and load, median of fresh processes"),
            ("first_load_s", result.get("first_load_s"), "s", "the first load, caches empty"),
            ("rss_added_mib", result.get("rss_added_mib"), "MiB", "resident memory added"),
            ("latency_ms", None if "latency_s" not in result else result["latency_s"] * 1000,
             "ms", "normalize one sentence, median over the test set"),
            ("wheel_x86_64", result["wheels"]["x86_64"], "", "a CPython 3.11 wheel for x86_64"),
            ("wheel_aarch64", result["wheels"]["aarch64"], "",
             "a CPython 3.11 wheel for aarch64 (of its native part)"),
            ("installed_mib", size, "MiB", "installed size with what it requires"),
            ("failures", "; ".join(sorted(set(result["errors"]))) or "none", "",
             "loads that failed, and why"),
        ]
        for row, (key, value, unit, what) in zip(cost_rows, cells, strict=True):
            row.append(figures.add(f"{name}.{key}", value, unit, f"{LABELS[name]}: {what}"))
    figures.table("Text normalizers: cost and packaging",
                  ["", *(LABELS[name] for name in results)], cost_rows,
                  note="Memory: VmRSS after loading minus before importing, in a fresh process. "
                       "Wheels: whether pip finds a binary wheel for manylinux2014 on that "
                       "architecture for CPython 3.11 (for the FST candidates, of pynini).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--loads", type=int, default=3, help="fresh processes per candidate")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    parser.add_argument("--nemo-python", default=sys.executable,
                        help="the Python that has nemo_text_processing installed")
    add_json_option(parser, "text_normalizers")
    parser.add_argument("--child", choices=CANDIDATES, help=argparse.SUPPRESS)
    parser.add_argument("--with-corpus", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        corpus = args.corpus if args.with_corpus else None
        print(json.dumps(child(args.child, corpus, args.cache_dir), ensure_ascii=False))
        return 0
    categories = list(dict.fromkeys(c for c, _, _ in read_corpus(args.corpus)))
    results = {}
    for name in args.candidates.split(","):
        python = args.nemo_python if name == "nemo" else sys.executable
        print(f"measuring {name} ...", file=sys.stderr)
        results[name] = measure(name, python, args.corpus, args.loads, args.timeout)
    figures = Figures()
    record(figures, results, categories)
    raw = {name: {"errors": r["errors"], "size": r["size"],
                  "lines": [{k: line[k] for k in ("category", "input", "output", "right")}
                            for line in r["lines"]]} for name, r in results.items()}
    write_result("text_normalizers", figures, args, raw=raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
