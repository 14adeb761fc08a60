"""docs/performance.md is generated from bench/results/*.json, and those files say what ran where.

The page and the results are committed together: regenerating the page from the committed results
must give the committed page (``bench/report.py --check``), and every results file carries the
run's machine, versions, date, arguments and figures.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
PAGE = ROOT / "docs" / "performance.md"
REQUIRED = {"bench", "title", "date", "command", "machine", "versions", "arguments", "figures",
            "tables"}
MACHINE = {"platform", "arch", "cpu", "cores", "memory_mib"}
VERSIONS = {"python", "onnxruntime", "numpy", "onnx", "piper-tts", "agent"}


def report(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH / "report.py"), *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=60)


def result_files() -> list[Path]:
    return sorted(RESULTS.glob("*.json"))


@pytest.fixture
def bench_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Import a bench module as its scripts do (``bench/`` on ``sys.path``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    loaded: list[str] = []

    def load(name: str) -> ModuleType:
        loaded.append(name)
        return importlib.import_module(name)

    yield load
    for name in (*loaded, "results"):
        sys.modules.pop(name, None)


def test_the_committed_page_is_generated_from_the_committed_results() -> None:
    assert result_files(), "no results committed under bench/results/"
    done = report("--check")
    assert done.returncode == 0, done.stderr
    page = PAGE.read_text(encoding="utf-8")
    for path in result_files():
        document = json.loads(path.read_text(encoding="utf-8"))
        assert f"## {document['bench']}\n" in page
        assert document["date"] in page


def test_every_bench_that_records_has_committed_results() -> None:
    recording = {path.stem for path in BENCH.glob("*.py")
                 if "write_result(" in path.read_text(encoding="utf-8") and path.stem != "results"}
    assert "compare_piper" in recording
    assert recording <= {path.stem for path in result_files()}


@pytest.mark.parametrize("path", result_files(), ids=lambda p: p.stem)
def test_every_results_file_has_the_required_keys(path: Path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document.keys() >= REQUIRED
    assert document["bench"] == path.stem
    assert document["command"].startswith(f"bench/{path.stem}.py")
    date = datetime.datetime.fromisoformat(document["date"])
    assert date.utcoffset() == datetime.timedelta(0)
    assert document["machine"].keys() >= MACHINE
    assert document["machine"]["cores"] >= 1
    assert document["versions"].keys() >= VERSIONS
    assert len(document["versions"]["agent"]["commit"]) == 40
    assert isinstance(document["versions"]["agent"]["dirty"], bool)
    figures = document["figures"]
    assert figures
    for key, figure in figures.items():
        assert {"value", "unit", "what"} <= figure.keys(), key
        assert figure["what"], key
    for table in document["tables"]:
        for row in table["rows"]:
            assert len(row) == len(table["columns"])
            assert all(key is None or key in figures for key in row[1:])


def test_the_check_fails_when_a_result_changes(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    page = tmp_path / "performance.md"
    assert report("--results", results, "--out", page).returncode == 0
    assert page.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
    assert report("--results", results, "--out", page, "--check").returncode == 0

    path = results / "compare_piper.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    figure = next(iter(document["figures"].values()))
    figure["value"] = -12345.0
    path.write_text(json.dumps(document), encoding="utf-8")
    stale = report("--results", results, "--out", page, "--check")
    assert stale.returncode == 1
    assert "stale" in stale.stderr
    assert report("--results", results, "--out", page).returncode == 0
    assert "-12345" in page.read_text(encoding="utf-8")


def test_a_malformed_results_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text(json.dumps({"bench": "broken", "figures": {
        "a": {"value": 1}}}), encoding="utf-8")
    done = report("--results", tmp_path, "--out", tmp_path / "page.md")
    assert done.returncode != 0
    assert "no 'machine'" in done.stderr
    assert "figure 'a' has no unit, what" in done.stderr
    assert not (tmp_path / "page.md").exists()


def test_write_result_records_the_run_and_the_page_shows_it(tmp_path: Path,
                                                           bench_module: Any) -> None:
    results = bench_module("results")
    figures = results.Figures()
    figures.table("Side by side", ["median", "ours", "vs piper"], [
        ["speed", figures.add("speed", 12.3456789, "x", "audio s per s"),
         figures.add("speed_vs", 1.61803, "x", "ours / piper")],
        ["word error rate", figures.add("wer", 4.25, "%", "pocketsphinx"),
         figures.add("wer_vs", 0.5, "pts", "ours - piper", signed=True)]])
    figures.add("sentences", 22, "", "held-out sentences")
    with pytest.raises(ValueError, match="unknown figures"):
        figures.table("bad", ["a", "b"], [["row", "no-such-figure"]])
    with pytest.raises(ValueError, match="twice"):
        figures.add("speed", 1.0, "x", "again")
    out = tmp_path / "results" / "demo.json"
    args = argparse.Namespace(json=out, models=ROOT / "models", child=None, runs=3,
                              sentences=tmp_path / "s.txt")
    assert results.write_result("demo", figures, args, raw={"k": [1]}, title="A demo.") == out

    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["bench"] == "demo"
    assert document["title"] == "A demo."
    assert document["arguments"] == {"models": "models", "runs": 3,
                                     "sentences": str(tmp_path / "s.txt")}
    assert document["machine"]["cores"] == os.cpu_count()
    assert document["machine"]["arch"] == platform.machine()
    assert document["versions"]["python"] == platform.python_version()
    assert len(document["versions"]["agent"]["commit"]) == 40
    assert document["figures"]["speed"] == {"value": 12.3457, "unit": "x",
                                            "what": "audio s per s"}
    assert document["raw"] == {"k": [1]}

    page = tmp_path / "page.md"
    assert report("--results", out.parent, "--out", page).returncode == 0
    text = page.read_text(encoding="utf-8")
    assert "| speed | 12.3x | 1.62x |" in text
    assert "| word error rate | 4.25 % | +0.500 pts |" in text
    assert "| `sentences` | 22 | held-out sentences |" in text
    assert "- arguments: `models=\"models\"`, `runs=3`" in text
