"""espeak-ng through ctypes: the real build the agent loads (the training build where ./build.sh
put it in the venv, else the system library) segments and phonemizes.

Phonemes pinned here avoid the words whose pronunciation changed between espeak-ng releases
(the 'or' vowel, the linking glide; see docs/text.md), so they hold on 1.51 and 1.52.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agent.text.espeak import (
    Clause,
    EspeakError,
    EspeakPhonemizer,
    terminator_of,
)


@pytest.fixture(scope="module")
def espeak() -> EspeakPhonemizer:
    return EspeakPhonemizer("en-us")


def _summary(clauses: list[Clause]) -> list[tuple[str, str, bool]]:
    return [(c.phonemes, c.terminator, c.end_of_sentence) for c in clauses]


# --- terminator recovery (pure) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("consumed", "expected"),
    [
        ("Hello,", (",", False)),
        ("world!", ("!", True)),
        ("How are you?", ("?", True)),
        ("Fine.", (".", True)),
        ("Remember:", (":", False)),
        ("I came;", (";", False)),
        ("no mark at all", ("", False)),
        # a run of ? and ! counts as its first mark, as espeak-ng reads it
        ("What?!", ("?", True)),
        ("Really!?", ("!", True)),
        ("No!!!", ("!", True)),
        # dashes end a clause as semicolons; an ellipsis ends one with no mark
        ("Wait \u2014", (";", False)),
        ("Wait \u2013", (";", False)),
        ("Wait...", ("", False)),
        ("Well\u2026", ("", False)),
        # closing quotes and brackets after the mark do not hide it
        ('He said "stop."', (".", True)),
        ("(Yes.)", (".", True)),
        ("\u201cReally?\u201d ", ("?", True)),
        # full-width marks: no terminator, but sentence ends where they are sentence marks
        ("Hello\uff01", ("", True)),
        ("Fine\u3002", ("", True)),
        ("Yes\uff0c", ("", False)),
        # punctuation without a letter or digit before it ends nothing
        ("?!", ("", False)),
        (". . .", ("", False)),
    ],
)
def test_terminator_of(consumed: str, expected: tuple[str, bool]) -> None:
    assert terminator_of(consumed) == expected


def test_the_last_clause_of_a_text_ends_a_sentence_without_a_mark() -> None:
    assert terminator_of("and then", last=True) == ("", True)
    assert terminator_of("and then,", last=True) == (",", False)
    assert terminator_of("and then...", last=True) == ("", False)
    assert terminator_of("and then\u2026", last=True) == ("", False)
    assert terminator_of("?!", last=True) == ("", False)


# --- segmentation with the real library -------------------------------------------------------


def test_clauses_carry_terminators_and_sentence_ends(espeak: EspeakPhonemizer) -> None:
    clauses = espeak.clauses("Hello, world! How are you? Fine.")
    assert _summary(clauses) == [
        ("həlˈoʊ", ",", False),
        ("wˈɜːld", "!", True),
        ("hˈaʊ ɑːɹ juː", "?", True),
        ("fˈaɪn", ".", True),
    ]
    assert [c.text for c in clauses] == ["Hello,", "world!", "How are you?", "Fine."]


def test_clause_texts_cover_the_input(espeak: EspeakPhonemizer) -> None:
    text = 'He said "Hi." "Bye." Then (after a pause) he left; the end...'
    clauses = espeak.clauses(text)
    assert " ".join(c.text for c in clauses) == text
    # the closing quote stays with the clause it closes
    assert [c.text for c in clauses][:2] == ['He said "Hi."', '"Bye."']


def test_dash_question_runs_and_ellipsis(espeak: EspeakPhonemizer) -> None:
    assert _summary(espeak.clauses("Wait \u2014 I forgot my keys.")) == [
        ("wˈeɪt", ";", False),
        ("aɪ fɚɡˈɑːt maɪ kˈiːz", ".", True),
    ]
    assert [(c.terminator, c.end_of_sentence) for c in espeak.clauses("What?! Really!?")] == [
        ("?", True), ("!", True)]
    # the last clause, ended by no mark, ends the sentence (what the training phonemizer's
    # espeak_TextToPhonemesWithTerminator reports; builds without the call agree)
    assert [(c.terminator, c.end_of_sentence)
            for c in espeak.clauses("Well... maybe; yes: no")] == [
        ("", False), (";", False), (":", False), ("", True)]


END_OF_TEXT = ["Well... maybe; yes: no", "A \u2013 B", "3.5 is... fine", "Wait... what?",
               "x: y; z,", "end\u2026", "Stop \u2014 now", '(Yes.) "No"', "One\uff0ctwo"]


@pytest.mark.parametrize("text", END_OF_TEXT)
def test_recovered_terminators_end_a_text_as_the_call_does(espeak: EspeakPhonemizer,
                                                           text: str) -> None:
    recovered = EspeakPhonemizer("en-us", terminator_api=False).clauses(text)
    last = recovered[-1]
    if last.terminator:  # a mark decides
        assert last.end_of_sentence == (last.terminator in ".?!")
    else:  # no mark at all ends the sentence; an ellipsis leaves it open
        assert last.end_of_sentence == (not last.text.endswith(("...", "\u2026")))
    if espeak.terminator_api:  # a build with the call (the training build, 1.52): the same
        assert _summary(espeak.clauses(text)) == _summary(recovered)


def test_abbreviations_follow_espeak(espeak: EspeakPhonemizer) -> None:
    # A dot before a lower-case word is an abbreviation; before a capital it ends a sentence
    # (that is also what Piper does, so the voice heard it that way).
    assert len(espeak.clauses("It is 5 p.m. now.")) == 1
    assert [c.text for c in espeak.clauses("Dr. Jones will see you now.")] == [
        "Dr.", "Jones will see you now."]


def test_punctuation_only_gives_no_clause(espeak: EspeakPhonemizer) -> None:
    assert espeak.clauses(".") == []
    assert espeak.clauses("?!") == []
    assert espeak.clauses("") == []


def test_long_clause_is_cut_without_terminator(espeak: EspeakPhonemizer) -> None:
    clauses = espeak.clauses(" ".join(["word"] * 300) + ".")
    assert len(clauses) > 1
    assert all((c.terminator, c.end_of_sentence) == ("", False) for c in clauses[:-1])
    assert (clauses[-1].terminator, clauses[-1].end_of_sentence) == (".", True)
    assert sum(c.phonemes.split().count("wˈɜːd") for c in clauses) == 300


def test_language_switch_flags_are_removed(espeak: EspeakPhonemizer) -> None:
    # espeak-ng wraps words it reads in another language in "(ko)...(en-us)".
    (clause,) = espeak.clauses("\ud55c\uad6d")
    assert clause.phonemes
    assert "(" not in clause.phonemes and ")" not in clause.phonemes
    assert "ko" not in clause.phonemes


def test_concurrent_callers_get_their_own_results(espeak: EspeakPhonemizer) -> None:
    texts = [f"Announcement number {n}, platform {n % 7}." for n in range(24)]
    expected = {text: _summary(espeak.clauses(text)) for text in texts}
    results: dict[str, list[tuple[str, str, bool]]] = {}
    lock = threading.Lock()

    def work(chunk: list[str]) -> None:
        for text in chunk * 3:
            summary = _summary(espeak.clauses(text))
            with lock:
                results.setdefault(text, summary)
                assert results[text] == summary

    threads = [threading.Thread(target=work, args=(texts[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == expected


def test_version_and_library(espeak: EspeakPhonemizer) -> None:
    assert espeak.version.startswith("1.")
    assert "espeak" in espeak.library


def test_unknown_voice_is_refused(espeak: EspeakPhonemizer) -> None:
    with pytest.raises(EspeakError, match="no voice"):
        EspeakPhonemizer("xx-nonexistent")


def test_one_build_per_process(espeak: EspeakPhonemizer) -> None:
    with pytest.raises(EspeakError, match="already loaded"):
        EspeakPhonemizer("en-us", library="/nonexistent/libespeak-ng.so.9")


def test_other_data_in_the_same_process_is_refused(espeak: EspeakPhonemizer,
                                                    tmp_path: Path) -> None:
    with pytest.raises(EspeakError, match="already loaded"):
        EspeakPhonemizer("en-us", data_path=str(tmp_path))
