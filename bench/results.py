"""Every bench's results as one JSON file under ``bench/results/``: what ran where, and its figures.

A bench collects its figures in a :class:`Figures` (each one a value, a unit and what it is; tables
only name figures) and calls :func:`write_result`, which adds the bench name, the date (UTC), the
machine, the versions (Python, onnxruntime, numpy, onnx, pocketsphinx, piper-tts, the agent's git
commit and whether ``agent/`` or ``bench/`` had uncommitted changes) and the arguments.
``bench/report.py`` turns those files into ``docs/performance.md``; nothing else copies a figure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
REQUIRED = ("bench", "title", "date", "command", "machine", "versions", "arguments", "figures",
            "tables")
"""The keys every results file has (``raw`` is optional: the bench's own detailed output)."""
PACKAGES = ("onnxruntime", "numpy", "onnx", "pocketsphinx", "piper-tts")
Value = float | int | str | bool | None


def default_path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def add_json_option(parser: argparse.ArgumentParser, name: str) -> None:
    """``--json PATH``: where the results go (default ``bench/results/<name>.json``)."""
    parser.add_argument("--json", type=Path, default=default_path(name),
                        help=f"write the results here (default bench/results/{name}.json)")


class Figures:
    """A bench's figures by key (value, unit, what it is) and the tables that show them."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, Value]] = {}
        self.tables: list[dict[str, Any]] = []

    def add(self, key: str, value: Value, unit: str, what: str, *, signed: bool = False) -> str:
        """Record one figure; returns ``key`` (for table rows). ``signed``: a difference, shown
        with its sign."""
        if key in self.figures:
            raise ValueError(f"figure {key!r} recorded twice")
        if isinstance(value, float):
            value = _rounded(value)
        self.figures[key] = {"value": value, "unit": unit, "what": what}
        if signed:
            self.figures[key]["signed"] = True
        return key

    def latency_row(self, key: str, label: str, values: dict[str, Any]) -> list[str | None]:
        """A table row for a latency summary (``p50_ms``, ``p95_ms``, ``max_ms``, ``n``; a
        missing one an empty cell), each recorded as ``key.STAT``."""
        return [label, *(self.add(f"{key}.{stat}", values[stat], unit,
                                  f"{label}: {stat.removesuffix('_ms')}")
                         if stat in values else None
                         for stat, unit in (("p50_ms", "ms"), ("p95_ms", "ms"),
                                            ("max_ms", "ms"), ("n", "")))]

    def table(self, title: str, columns: list[str], rows: list[list[str | None]],
              note: str = "") -> None:
        """A table: each row is its label, then one figure key (or None: empty) per column
        after the first; ``note`` is printed under it."""
        for row in rows:
            if len(row) != len(columns):
                raise ValueError(f"{title}: row {row[0]!r} has {len(row)} cells, "
                                 f"{len(columns)} columns")
            unknown = [key for key in row[1:] if key is not None and key not in self.figures]
            if unknown:
                raise ValueError(f"{title}: unknown figures {unknown}")
        self.tables.append({"title": title, "columns": columns, "rows": rows, "note": note})


def _rounded(value: float) -> float:
    """Six significant digits: the JSON stays readable, no figure is that precise."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, 5 - math.floor(math.log10(abs(value))))


def machine() -> dict[str, Any]:
    """Platform, architecture, CPU model, cores and memory of this machine."""
    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                cpu = value.strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return {"platform": platform.platform(), "arch": platform.machine(), "cpu": cpu,
            "cores": os.cpu_count(), "memory_mib": memory}


def _git(*args: str) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run([git, *args], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def versions() -> dict[str, Any]:
    """Python, the packages that decide the figures (None: not installed) and the agent's
    commit; ``dirty`` when ``agent/`` or ``bench/`` differ from it."""
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    status = _git("status", "--porcelain", "--untracked-files=no", "--", "agent", "bench")
    out["agent"] = {"commit": _git("rev-parse", "HEAD"),
                    "dirty": None if status is None else bool(status)}
    return out


def _plain(value: Any) -> Any:
    """An argument as JSON: paths inside the checkout relative to it."""
    if isinstance(value, Path):
        path = value.resolve()
        return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The bench's parsed arguments, less where its results go and its child-process flags."""
    return {k: _plain(v) for k, v in sorted(vars(args).items())
            if k not in ("json", "child", "worker")}


def write_result(name: str, figures: Figures, args: argparse.Namespace,
                 raw: Any = None, title: str = "") -> Path:
    """Write ``args.json`` (``bench/results/<name>.json`` unless given) and return its path.

    ``title`` defaults to the first paragraph of the running script's docstring."""
    if not title:
        title = (getattr(sys.modules["__main__"], "__doc__", None) or name).strip()
        title = " ".join(title.split("\n\n")[0].split())
    document = {
        "bench": name,
        "title": title,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/" + Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": machine(),
        "versions": versions(),
        "arguments": arguments(args),
        "figures": figures.figures,
        "tables": figures.tables,
    }
    if raw is not None:
        document["raw"] = raw
    path = Path(getattr(args, "json", None) or default_path(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False, sort_keys=False) + "\n",
                    encoding="utf-8")
    print(f"results: {path}", file=sys.stderr)
    return path
