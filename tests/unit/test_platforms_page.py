"""docs/platforms.md's table is generated from bench/results/platforms.json (#25 item 6).

``bench/platforms.py`` renders the matrix's rows between the page's markers; the committed page
must be what the committed results render to, and a changed result makes it stale.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.support import REPO


@pytest.fixture
def matrix() -> Iterator[ModuleType]:
    """bench/platforms.py, loaded as its script runs (it puts ``bench/`` on ``sys.path``)."""
    path = REPO / "bench" / "platforms.py"
    spec = importlib.util.spec_from_file_location("bench_platforms", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        while str(path.parent) in sys.path:
            sys.path.remove(str(path.parent))
        sys.modules.pop("results", None)


def test_the_committed_page_is_what_the_results_render(matrix: ModuleType) -> None:
    page = matrix.PAGE.read_text(encoding="utf-8")
    document = matrix.load()
    assert matrix.render(page, document) == page, "run .venv/bin/python bench/platforms.py"
    rows = document["raw"]["rows"]
    assert rows, "no platform rows in bench/results/platforms.json"
    for name, row in rows.items():
        assert f"**{name}**" in page
        assert f"| {row['platform']} |" in page


def test_every_row_names_its_versions_steps_and_run(matrix: ModuleType) -> None:
    for name, row in matrix.load()["raw"]["rows"].items():
        assert row["arch"] in {"x86_64", "aarch64"}, name
        assert len(row["commit"]) == 40, name
        assert row["date"].endswith("+00:00"), name
        if row.get("unavailable"):
            assert row["unavailable"]["command"].startswith("mmdebstrap "), name
            continue
        assert row["steps"], name
        for step, data in row["steps"].items():
            assert step in matrix.STEPS, (name, step)
            assert data["status"] in {"passed", "failed"}, (name, step)
            assert data["seconds"] >= 0, (name, step)
        if row["steps"].get("build", {}).get("status") == "passed":
            assert row["python"] and row["onnxruntime"] and row["espeak_ng"], name


def test_a_changed_result_makes_the_page_stale(matrix: ModuleType) -> None:
    page = matrix.PAGE.read_text(encoding="utf-8")
    document = copy.deepcopy(matrix.load())
    name, row = next(iter(document["raw"]["rows"].items()))
    row["python"] = "9.99.0"
    rendered = matrix.render(page, document)
    assert rendered != page and "| 9.99.0 |" in rendered
    assert rendered.startswith(page.partition(matrix.BEGIN)[0])  # the prose stays
    assert rendered.endswith(page.partition(matrix.END)[2])
    assert name in rendered
