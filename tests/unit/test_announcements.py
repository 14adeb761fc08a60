"""The announcement test sets (#16, #29): the normalizer's readings checked by their phonemes.

Each row of ``bench/corpus/announcements.tsv`` (development) is normalized by
``agent.text.normalize`` and phonemized by the real espeak-ng (``en-us``), and so are its
expected readings; the row is read right when the phonemes equal one reading's, with clause
breaks and marks, stress marks and word spaces left out (the comparison is
``bench/text_accuracy.py``'s, documented there). At least 95 % must be read right; every miss is
listed. The held-out set ``bench/corpus/heldout.tsv`` is only measured (no floor here, its misses
never listed). ``docs/text.md`` shows both sets' shares from
``bench/results/text_accuracy.json``, and both must match what the code reads now.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from agent.text.espeak import EspeakPhonemizer
from tests.support import REPO

TARGET = 0.95
MIN_ROWS = 150
MIN_HELDOUT_ROWS = 100
CATEGORIES = {"cardinal", "decimal", "ordinal", "currency", "time", "date", "year", "range",
              "score", "fraction", "percent", "temperature", "unit", "phone", "code",
              "abbreviation", "initialism", "acronym", "roman", "symbol", "url_email"}
"""Every category #16 lists."""


@pytest.fixture(scope="module")
def outcomes(accuracy: ModuleType) -> list[Any]:
    espeak = EspeakPhonemizer("en-us")
    result: list[Any] = accuracy.score(accuracy.read_corpus(), accuracy.agent_words(),
                                       espeak.clauses)
    return result


@pytest.fixture(scope="module")
def heldout(accuracy: ModuleType) -> list[Any]:
    espeak = EspeakPhonemizer("en-us")
    result: list[Any] = accuracy.score(accuracy.read_corpus(accuracy.HELDOUT),
                                       accuracy.agent_words(), espeak.clauses)
    return result


def test_the_test_set_covers_every_category(accuracy: ModuleType) -> None:
    rows = accuracy.read_corpus()
    assert len(rows) >= MIN_ROWS
    assert {row.category for row in rows} >= CATEGORIES
    assert len({row.text for row in rows}) == len(rows), "an input appears twice"


def test_the_heldout_set_is_its_own(accuracy: ModuleType) -> None:
    rows = accuracy.read_corpus(accuracy.HELDOUT)
    assert len(rows) >= MIN_HELDOUT_ROWS
    assert {row.category for row in rows} <= CATEGORIES, "a category the development set lacks"
    assert len({row.text for row in rows}) == len(rows), "an input appears twice"
    shared = {row.text for row in rows} & {row.text for row in accuracy.read_corpus()}
    assert not shared, f"held-out inputs also in the development corpus: {sorted(shared)}"


def test_announcements_are_read_right(outcomes: list[Any]) -> None:
    misses = [o for o in outcomes if not o.right]
    share = 1 - len(misses) / len(outcomes)
    listing = "\n".join(f"{o.row.category}: {o.row.text!r} -> {o.normalized!r} "
                        f"[{o.phonemes}] expected one of {list(o.row.readings)}"
                        for o in misses)
    assert share >= TARGET, f"{share:.1%} read right, under {TARGET:.0%}; misses:\n{listing}"


def test_the_comparison_tells_readings_apart(accuracy: ModuleType) -> None:
    espeak = EspeakPhonemizer("en-us")

    def same(a: str, b: str) -> bool:
        return bool(accuracy.phonemes_of(espeak.clauses, a)
                    == accuracy.phonemes_of(espeak.clauses, accuracy.for_espeak(b)))

    assert same("five five five, oh one two three", "five five five oh one two three")
    assert same("thirty-four", "thirty four")
    assert same("the ATM", "the A T M")
    assert not same("nine thirty a m", "nine thirty A M")  # the article is not the letter
    assert not same("dollar twelve point five zero", "twelve dollars and fifty cents")
    assert not same("twelve", "twenty")


def test_the_results_and_the_page_are_what_the_code_reads_now(accuracy: ModuleType,
                                                              outcomes: list[Any],
                                                              heldout: list[Any]) -> None:
    path = REPO / "bench" / "results" / "text_accuracy.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    stale = "bench/results/text_accuracy.json is stale: run .venv/bin/python bench/text_accuracy.py"
    recorded = {(r["input"], r["right"]) for r in document["raw"]["development"]["rows"]}
    assert recorded == {(o.row.text, o.right) for o in outcomes}, stale
    held = document["raw"]["heldout"]
    assert held["digest"] == accuracy.digest(heldout), stale
    assert held["categories"]["overall"] == [sum(o.right for o in heldout), len(heldout)], stale
    assert "rows" not in held and "misses" not in held, "the held-out misses are not shown"
    page = (REPO / "docs" / "text.md").read_text(encoding="utf-8")
    assert accuracy.rewrite_page(page, document) == page, (
        "docs/text.md's accuracy block is stale: run .venv/bin/python bench/text_accuracy.py")


def test_the_page_shows_both_sets_per_kind(accuracy: ModuleType) -> None:
    result = {"corpus": "x.tsv", "categories": {"date": [1, 2], "overall": [1, 2]}, "misses": []}
    document = {"date": "2026-12-02T00:00:00", "versions": {"agent": {"commit": "abc"}},
                "raw": {"development": result,
                        "heldout": {"corpus": "h.tsv", "digest": "",
                                    "categories": {"unit": [3, 4], "overall": [3, 4]}}}}
    text = accuracy.block(document)
    assert "**1 of 2 (50.0 %)** of the development corpus" in text
    assert "**3 of 4 (75.0 %)** of the held-out set" in text
    assert "| date | 50 % | 2 |  | 0 | 50 % |" in text
    assert "| unit |  | 0 | 75 % | 4 | 75 % |" in text
    assert "the whole corpus: **4 of 6 (66.7 %)**" in text
