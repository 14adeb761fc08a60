"""The generated pages' scripts as a contributor runs them (``docs/reference.py --check``,
``bench/report.py``), and a bench's results file recording the checkout's commit (git). The
in-process tests of the same pages are tests/unit/test_docs.py and
tests/unit/test_performance_page.py."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import REPO

ROOT = REPO
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
PAGE = ROOT / "docs" / "performance.md"


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


def test_the_script_checks_from_the_command_line() -> None:
    done = subprocess.run([sys.executable, "docs/reference.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_committed_page_is_generated_from_the_committed_results() -> None:
    assert result_files(), "no results committed under bench/results/"
    done = report("--check")
    assert done.returncode == 0, done.stderr
    page = PAGE.read_text(encoding="utf-8")
    for path in result_files():
        document = json.loads(path.read_text(encoding="utf-8"))
        assert f"## {document['bench']}\n" in page
        assert document["date"] in page


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
