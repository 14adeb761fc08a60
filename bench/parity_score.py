"""Scoring our phoneme ids against a reference, diagnosing each mismatch, and the report of
``phoneme_parity.py`` (printed, and as figures for ``bench/results/phoneme_parity.json``)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from results import Figures


@dataclass(frozen=True)
class Build:
    """One espeak-ng build our frontend runs on (``library``/``data`` None: the system's)."""

    key: str
    title: str
    library: str | None = None
    data: str | None = None
    terminator_api: bool = False
    control: bool = False


# ---------------------------------------------------------------------------------------------
# Comparison


def levenshtein(a: Sequence[int], b: Sequence[int]) -> int:
    """Edit distance (insertions, deletions, substitutions) between two id sequences."""
    if a == b:
        return 0
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


@dataclass
class Mismatch:
    line: int
    text: str
    ours: str
    reference: str
    edits: int
    causes: list[str]


@dataclass
class Score:
    build: Build
    reference: str
    version: str
    sentences: int = 0
    identical: int = 0
    reference_ids: int = 0
    edits: int = 0
    grouping: list[int] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    word_diffs: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def identical_pct(self) -> float:
        return 100.0 * self.identical / max(1, self.sentences)

    @property
    def edit_rate_pct(self) -> float:
        return 100.0 * self.edits / max(1, self.reference_ids)


def _word_diff(ours: str, ref: str) -> list[tuple[str, str]]:
    """Phoneme words that differ between two clause strings (same word count), else whole."""
    a, b = ours.split(), ref.split()
    if len(a) != len(b):
        return [(ours, ref)]
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


KNOWN_RULES = {
    "j-glide": "a linking ʲ after i, iː, ɪ or aɪ before a vowel (espeak-ng 1.52.0.1 only)",
    "or-vowel": "the vowel of 'or' words: oːɹ (1.51, 1.52-dev) vs ɔːɹ (1.52.0 on)",
    "other": "any other dictionary or rule change",
}


def rule_of(ours: str, ref: str) -> str:
    """Which known espeak-ng change explains one differing phoneme word (see KNOWN_RULES)."""
    if ours.replace("ʲ", "") == ref.replace("ʲ", ""):
        return "j-glide"
    plain, other = ours.replace("ʲ", ""), ref.replace("ʲ", "")
    if plain.replace("oːɹ", "ɔːɹ") == other.replace("oːɹ", "ɔːɹ"):
        return "or-vowel" if "ʲ" not in ours + ref else "j-glide+or-vowel"
    return "other"


def _by_sentence(clauses: list[list[Any]]) -> list[list[list[Any]]]:
    groups: list[list[list[Any]]] = [[]]
    for clause in clauses:
        groups[-1].append(clause)
        if clause[2]:
            groups.append([])
    return [g for g in groups if any(c[0] or c[1] for c in g)]


def diagnose_clauses(oc: list[list[Any]], rc: list[list[Any]],
                     word_diffs: dict[str, tuple[str, str]], same_build: bool,
                     versions: str) -> list[str]:
    """Why clauses differ: segmentation, terminator recovery, or the espeak-ng dictionary."""
    if len(oc) != len(rc):
        return [f"clause segmentation: {len(oc)} clause(s) here, {len(rc)} in the reference"
                f" ({' | '.join(c[0] for c in oc)} vs {' | '.join(c[0] for c in rc)})"]
    causes = []
    for ours, ref in zip(oc, rc, strict=True):
        if (ours[1], bool(ours[2])) != (ref[1], bool(ref[2])):
            label = repr(ours[3]) if len(ours) > 3 else repr(ours[0])
            causes.append(f"clause terminator: {label} ends with {ours[1] or 'nothing'!r}"
                          f" (sentence end {bool(ours[2])}) here, {ref[1] or 'nothing'!r}"
                          f" (sentence end {bool(ref[2])}) in the reference")
        if ours[0] != ref[0]:
            pairs = _word_diff(ours[0], ref[0])
            shown = ", ".join(f"{x} -> {y}" for x, y in pairs)
            if same_build:
                causes.append(f"phonemes differ on the same espeak-ng build: {shown}")
                continue
            words = sorted(w for w, (a, b) in word_diffs.items()
                           if any(x in a.split() and y in b.split() for x, y in pairs))
            where = (f"; corpus words that differ alone the same way: {', '.join(words)}"
                     if words else "; differs only in context")
            rules = sorted({rule_of(x, y) for x, y in pairs})
            causes.append(f"espeak-ng {versions} dictionary/rules [{', '.join(rules)}]:"
                          f" {shown}{where}")
    return causes


def diagnose(ours: dict[str, Any], ref: dict[str, Any], word_diffs: dict[str, tuple[str, str]],
             same_build: bool, versions: str) -> list[list[str]]:
    """Causes per reference sentence of a line (one list for the line if grouping differs)."""
    if ours.get("error"):
        return [[f"our frontend refused the text: {ours['error']}"]]
    prefix = []
    if ours.get("normalized", ref["text"]) != ref["text"]:
        prefix.append("normalisation changed the text (the reference phonemizes it raw)")
    if len(ours["sentences"]) != len(ref["sentences"]):
        prefix.append(f"grouping: {len(ours['sentences'])} sentence(s) here,"
                      f" {len(ref['sentences'])} in the reference")
        return [prefix + diagnose_clauses(ours["clauses"], ref["clauses"], word_diffs,
                                          same_build, versions)]
    o_groups, r_groups = _by_sentence(ours["clauses"]), _by_sentence(ref["clauses"])
    if len(o_groups) == len(r_groups) == len(ref["sentences"]):
        return [prefix + diagnose_clauses(o, r, word_diffs, same_build, versions)
                for o, r in zip(o_groups, r_groups, strict=True)]
    line = prefix + diagnose_clauses(ours["clauses"], ref["clauses"], word_diffs, same_build,
                                     versions)
    return [line for _ in ref["sentences"]]


def score(build: Build, ours: dict[str, Any], ref_key: str, ref: dict[str, Any]) -> Score:
    result = Score(build, ref_key, ours["version"])
    for word, ref_ph in ref["words"].items():
        our_ph = ours["words"].get(word)
        if our_ph is not None and our_ph != ref_ph:
            result.word_diffs[word] = (our_ph, ref_ph)
    same_build = ours["version"] == ref["version"]
    versions = f"{ours['version']} vs {ref['version']}"
    for number, (o_line, r_line) in enumerate(zip(ours["lines"], ref["lines"], strict=True), 1):
        r_ids: list[list[int]] = r_line["ids"]
        o_ids: list[list[int]] = o_line["ids"]
        result.sentences += len(r_ids)
        result.reference_ids += sum(len(ids) for ids in r_ids)
        if len(o_ids) == len(r_ids):
            pairs = list(zip(o_ids, r_ids, strict=True))
            texts = list(zip(o_line["sentences"], r_line["sentences"], strict=True))
        else:
            result.grouping.append(number)
            pairs = [([i for ids in o_ids for i in ids], [i for ids in r_ids for i in ids])]
            texts = [(" | ".join(o_line["sentences"]), " | ".join(r_line["sentences"]))]
        causes: list[list[str]] | None = None
        for index, ((o, r), (o_text, r_text)) in enumerate(zip(pairs, texts, strict=True)):
            if o == r and len(pairs) == len(r_ids):
                result.identical += 1
                continue
            edits = levenshtein(o, r)
            result.edits += edits
            if causes is None:
                causes = diagnose(o_line, r_line, result.word_diffs, same_build, versions)
            reasons = causes[min(index, len(causes) - 1)] or [
                "unexplained: clauses agree, ids differ (check grouping and phonemes_to_ids)"]
            result.mismatches.append(Mismatch(number, r_line["text"], o_text, r_text, edits,
                                              reasons))
    return result


def untrained_hits(lines: list[dict[str, Any]], untrained: set[int],
                   id_map: dict[str, list[int]]) -> Counter[str]:
    names = {ids[0]: symbol for symbol, ids in id_map.items() if len(ids) == 1}
    hits: Counter[str] = Counter()
    for line in lines:
        for ids in line["ids"]:
            hits.update(names.get(i, str(i)) for i in ids if i in untrained)
    return hits


# ---------------------------------------------------------------------------------------------
# Report


def _hits_text(hits: Counter[str] | None) -> str:
    if hits is None:
        return "?"
    return ", ".join(f"{s} x{n}" for s, n in hits.most_common()) or "none"


def report(scores: list[Score], refs: dict[str, dict[str, Any]],
           hits: dict[str, Counter[str] | None], corpus_size: int, summary_only: bool) -> str:
    out = []
    for key, ref in refs.items():
        total = next((s.sentences for s in scores if s.reference == key), 0)
        out.append(f"Reference {key}: {ref['package']} (espeak-ng {ref['version']}),"
                   f" {corpus_size} lines, {total} sentences as it groups them;"
                   f" untrained symbols it emits: {_hits_text(hits.get(key))}")
    out.append("")
    for s in scores:
        if summary_only:
            break
        out.append(f"== {s.build.key} (espeak-ng {s.version}) vs {s.reference}:"
                   f" {len(s.mismatches)} mismatching sentence(s)")
        for m in s.mismatches:
            out.append(f"  line {m.line} ({m.edits} edit(s)): {m.text}")
            out.append(f"    ours : {m.ours}")
            out.append(f"    ref  : {m.reference}")
            out.extend(f"    cause: {cause}" for cause in m.causes)
        tally = Counter(rule for m in s.mismatches for rule in {
            rule for c in m.causes for rules in re.findall(r"\[([^]]+)\]", c)
            for rule in rules.split(", ")})
        if tally:
            out.append("  sentences per espeak-ng change: "
                       + ", ".join(f"{k} {n}" for k, n in tally.most_common()))
        if s.grouping:
            out.append(f"  grouping differences (lines): {', '.join(map(str, s.grouping))}")
        if s.word_diffs:
            out.append(f"  words phonemized differently on their own ({len(s.word_diffs)}):")
            out.extend(f"    {word}: {a} (here) vs {b} (reference)"
                       for word, (a, b) in sorted(s.word_diffs.items()))
        out.append("")
    out.append("Rules named above: " + "; ".join(f"{k} = {v}" for k, v in KNOWN_RULES.items()))
    out.append("")
    keys = list(refs)
    out.append("Summary (identical sentences / id edit rate, punctuation ids included):")
    out.append("| espeak-ng build | version | " + " | ".join(f"vs {k}" for k in keys)
               + " | untrained symbols emitted |")
    out.append("|---|---|" + "---|" * len(keys) + "---|")
    for build in dict.fromkeys(s.build for s in scores):
        row = [f"{build.key}{' (control)' if build.control else ''}",
               next(s.version for s in scores if s.build == build)]
        for key in keys:
            s = next(x for x in scores if x.build == build and x.reference == key)
            row.append(f"{s.identical_pct:.1f}% / {s.edit_rate_pct:.2f}%"
                       + (f" ({len(s.grouping)} grouping)" if s.grouping else ""))
        row.append(_hits_text(hits.get(build.key)))
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def record(scores: list[Score], refs: dict[str, dict[str, Any]],
           hits: dict[str, Counter[str] | None], corpus_size: int) -> Figures:
    """The summary table as figures: per build and reference, identical sentences and id edit
    rate; the untrained symbols each emits."""
    figures = Figures()
    figures.add("corpus_lines", corpus_size, "", "corpus lines")
    figures.table("References", ["reference", "package", "espeak-ng", "sentences",
                                 "untrained symbols emitted"], [
        [key, figures.add(f"{key}.package", ref["package"], "", f"{key}: the package"),
         figures.add(f"{key}.version", ref["version"], "", f"{key}: its espeak-ng version"),
         figures.add(f"{key}.sentences",
                     next((s.sentences for s in scores if s.reference == key), 0), "",
                     f"{key}: corpus sentences as it groups them"),
         figures.add(f"{key}.untrained", _hits_text(hits.get(key)), "",
                     f"{key}: emitted ids whose embedding row training never moved")]
        for key, ref in refs.items()])
    rows: list[list[str | None]] = []
    for build in dict.fromkeys(s.build for s in scores):
        name = f"{build.key}{' (control)' if build.control else ''}"
        row: list[str | None] = [
            name, figures.add(f"{build.key}.version",
                              next(s.version for s in scores if s.build == build), "",
                              f"{name}: espeak-ng version")]
        for key in refs:
            s = next(x for x in scores if x.build == build and x.reference == key)
            row += [figures.add(f"{build.key}.vs.{key}.identical", s.identical_pct, "%",
                                f"{name} vs {key}: sentences with identical ids"),
                    figures.add(f"{build.key}.vs.{key}.edit_rate", s.edit_rate_pct, "%",
                                f"{name} vs {key}: id edits / reference ids"),
                    figures.add(f"{build.key}.vs.{key}.grouping", len(s.grouping), "",
                                f"{name} vs {key}: lines grouped into other sentences")]
        rows.append([*row, figures.add(f"{build.key}.untrained", _hits_text(hits.get(build.key)),
                                       "", f"{name}: untrained symbols emitted")])
    columns = ["espeak-ng build", "version"]
    for key in refs:
        columns += [f"identical vs {key}", f"id edit rate vs {key}", f"grouping vs {key}"]
    figures.table("Our frontend per espeak-ng build against each reference",
                  [*columns, "untrained symbols emitted"], rows)
    return figures
