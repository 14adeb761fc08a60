"""docs/performance.md is generated from bench/results/*.json, and those files say what ran where.

The page and the results are committed together: regenerating the page from the committed results
must give the committed page (``bench/report.py --check``), and every results file carries the
run's machine, versions, date, arguments and figures.
"""

from __future__ import annotations

import datetime
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import in_process

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
PAGE = ROOT / "docs" / "performance.md"
REQUIRED = {"bench", "title", "date", "command", "machine", "versions", "arguments", "figures",
            "tables"}
MACHINE = {"platform", "arch", "cpu", "cores", "memory_mib"}
VERSIONS = {"python", "onnxruntime", "numpy", "onnx", "piper-tts", "agent"}


def report(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``bench/report.py ARGS``, run in this process as its script runs (``bench/`` first on
    ``sys.path``); tests/integration/test_generated_pages.py runs the script itself."""
    sys.path.insert(0, str(BENCH))
    try:
        module = importlib.import_module("report")
        return in_process(*args, main=module.main)
    finally:
        sys.path.remove(str(BENCH))
        for name in ("report", "results"):
            sys.modules.pop(name, None)


def result_files() -> list[Path]:
    return sorted(RESULTS.glob("*.json"))


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
