"""Phoneme-id parity of our text frontend with the reference Piper runtime (piper-tts).

    .venv/bin/python bench/phoneme_parity.py [--corpus FILE] [--voice-dir DIR] [--builds K,K]
                                             [--summary-only] [--json OUT]

For every line of the corpus (default ``bench/corpus/parity.txt``) it compares the phoneme ids
the agent feeds the model (``agent.text.frontend.Frontend``, which is what ``Voice`` synthesizes)
with a reference, per sentence as the reference groups them, and prints for each pair:

* identical sentences: % of reference sentences whose id sequences are identical;
* id edit rate: Levenshtein distance over ids (punctuation, BOS/PAD/EOS included), summed over
  sentences, divided by the number of reference ids;
* every mismatch: the text, both phoneme strings and its diagnosed cause.

References (each needs its package in the venv; both are bench-only, the agent imports neither):

* ``piper-tts``: the current Piper runtime, ``PiperVoice.phonemize`` + ``phonemes_to_ids``
  (espeak-ng fork 1.52.0.1 inside it). This is the issue's target.
* ``training``: ``piper-phonemize`` 1.1.0, the phonemizer Piper 1.0 voices were trained
  with (its espeak-ng fork says 1.52-dev): what the voice expects.

Our frontend runs once per espeak-ng build (``TTS_AGENT_ESPEAK_LIBRARY``-style selection):

* ``system``: Debian's ``libespeak-ng1`` (1.51), what the agent ships with (x86_64 + aarch64);
* ``wheel``: the ``espeakng-loader`` wheel's upstream 1.52.0 (x86_64 only);
* controls, loaded by our own ctypes code but never by the agent: ``training-lib`` (the library
  inside piper-phonemize), ``bridge`` (the one inside piper-tts), both recovering clause
  terminators from the text as the agent must on the builds above, and ``bridge+api`` which
  reads them with ``espeak_TextToPhonemesWithTerminator``. A control that matches its own
  reference proves our segmentation, grouping and id mapping; what is left on the other builds
  is the espeak-ng dictionary.

The voice itself says which phonemes it knows: the rows of its phoneme-embedding table that
training never touched keep their small random-init norm. The bench lists, per build and
reference, how many emitted ids hit such an untrained row.

Each build and reference runs in its own subprocess: the builds share a soname and global
state and must not meet in one process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "bench" / "corpus" / "parity.txt"
DEFAULT_VOICE_DIR = ROOT / "models" / "en_US-joe-medium"
_WORD_STRIP = "\"'“”‘’()[]{},.;:!?…—–-"


# ---------------------------------------------------------------------------------------------
# Workers: run in subprocesses, print one JSON document on stdout.


def _voice_files(voice_dir: Path) -> tuple[Path, Path]:
    configs = sorted(voice_dir.glob("*.onnx.json"))
    if not configs:
        raise SystemExit(f"no *.onnx.json in {voice_dir}: run ./build.sh to prepare the voice")
    return configs[0].with_suffix(""), configs[0]


def _words(text: str) -> list[str]:
    words = (token.strip(_WORD_STRIP) for token in text.split())
    return [word for word in words if word]


def _library_version(path: str) -> str:
    import ctypes

    library = ctypes.CDLL(path)
    library.espeak_Info.restype = ctypes.c_char_p
    library.espeak_Info.argtypes = [ctypes.c_void_p]
    return str(library.espeak_Info(None).decode())


def _worker_piper_tts(corpus: list[str], voice_dir: Path) -> dict[str, Any]:
    from piper import PiperVoice, espeakbridge

    model, config = _voice_files(voice_dir)
    voice = PiperVoice.load(model, config_path=config)
    espeak_voice = voice.config.espeak_voice
    lines = []
    words: dict[str, str] = {}
    for text in corpus:
        sentences = voice.phonemize(text)
        espeakbridge.set_voice(espeak_voice)
        clauses = [[ph, term, eos] for ph, term, eos in espeakbridge.get_phonemes(text)]
        lines.append({"text": text, "clauses": clauses,
                      "sentences": ["".join(s) for s in sentences],
                      "ids": [voice.phonemes_to_ids(s) for s in sentences]})
        for word in _words(text):
            if word not in words:
                espeakbridge.set_voice(espeak_voice)
                words[word] = " ".join(ph for ph, _, _ in espeakbridge.get_phonemes(word))
    return {"version": _library_version(str(espeakbridge.__file__)),
            "package": "piper-tts " + _dist_version("piper-tts"), "lines": lines,
            "words": {w: p.strip() for w, p in words.items()}}


def _worker_training(corpus: list[str], voice_dir: Path) -> dict[str, Any]:
    from piper_phonemize import phoneme_ids_espeak, phonemize_espeak  # type: ignore[import-untyped]

    from agent.text.espeak import EspeakPhonemizer

    _, config = _voice_files(voice_dir)
    espeak_voice = json.loads(config.read_text(encoding="utf-8"))["espeak"]["voice"]
    phonemize_espeak("x", espeak_voice)  # initialises the library piper-phonemize links
    library, data = _training_library()
    # The same loaded instance through our ctypes code, for its clause terminators (the module
    # does not expose them). Calls alternate on one thread, so the shared state is harmless.
    clauses_of = EspeakPhonemizer(espeak_voice, library=library, data_path=data).clauses
    lines = []
    words: dict[str, str] = {}
    for text in corpus:
        # Training skipped empty utterances; piper-phonemize reports a trailing empty sentence
        # after a closing quote, which would never reach the model: drop those.
        sentences = [s for s in phonemize_espeak(text, espeak_voice) if s]
        lines.append({"text": text,
                      "clauses": [[c.phonemes, c.terminator, c.end_of_sentence]
                                  for c in clauses_of(text)],
                      "sentences": ["".join(s) for s in sentences],
                      "ids": [phoneme_ids_espeak(s) for s in sentences]})
        for word in _words(text):
            if word not in words:
                words[word] = " ".join(c.phonemes for c in clauses_of(word)).strip()
    return {"version": _library_version(library),
            "package": "piper-phonemize " + _dist_version("piper-phonemize"), "lines": lines,
            "words": words}


def _worker_ours(corpus: list[str], voice_dir: Path, library: str | None, data: str | None,
                 terminator_api: bool) -> dict[str, Any]:
    from agent.text.espeak import EspeakPhonemizer
    from agent.text.frontend import Frontend, TextError, normalize_text

    _, config_path = _voice_files(voice_dir)
    config = json.loads(config_path.read_text(encoding="utf-8"))
    espeak_voice = config["espeak"]["voice"]
    phonemizer = EspeakPhonemizer(espeak_voice, library=library, data_path=data,
                                  terminator_api=terminator_api)
    frontend = Frontend(espeak_voice, config["phoneme_id_map"], phonemizer=phonemizer,
                        max_chars=10_000)
    lines: list[dict[str, Any]] = []
    words: dict[str, str] = {}
    for text in corpus:
        try:
            normalized = normalize_text(text, frontend.max_chars)
            sentences = frontend.sentences(text)
        except TextError as exc:
            lines.append({"text": text, "error": str(exc), "clauses": [], "sentences": [],
                          "ids": []})
            continue
        lines.append({
            "text": text,
            "normalized": normalized,
            "clauses": [[c.phonemes, c.terminator, c.end_of_sentence, c.text]
                        for c in frontend.clauses(normalized)],
            "sentences": ["".join(s.phonemes) for s in sentences],
            "ids": [frontend.ids(s) for s in sentences],
        })
        for word in _words(text):
            if word not in words:
                words[word] = " ".join(c.phonemes for c in phonemizer.clauses(word)).strip()
    return {"version": phonemizer.version, "package": phonemizer.library,
            "terminator_api": phonemizer.terminator_api, "lines": lines, "words": words}


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


# ---------------------------------------------------------------------------------------------
# What is installed: builds and references


@dataclass(frozen=True)
class Build:
    key: str
    title: str
    library: str | None = None
    data: str | None = None
    terminator_api: bool = False
    control: bool = False


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _training_library() -> tuple[str, str]:
    package = _package_dir("piper_phonemize")
    if package is None:
        raise SystemExit("piper-phonemize is not installed")
    libraries = sorted((package.parent / "piper_phonemize.libs").glob("libespeak-ng*.so*"))
    if not libraries:
        raise SystemExit("piper-phonemize carries no libespeak-ng")
    return str(libraries[0]), str(package / "espeak-ng-data")


def available_builds() -> list[Build]:
    builds = [Build("system", "system libespeak-ng1 (Debian), shipped")]
    wheel = _package_dir("espeakng_loader")
    if wheel is not None and (wheel / "libespeak-ng.so").exists():
        builds.append(Build("wheel", "espeakng-loader wheel", str(wheel / "libespeak-ng.so"),
                            str(wheel / "espeak-ng-data")))
    if _package_dir("piper_phonemize") is not None:
        library, data = _training_library()
        builds.append(Build("training-lib", "piper-phonemize's espeak-ng (control)", library,
                            data, control=True))
    piper = _package_dir("piper")
    bridge = next(iter(sorted(piper.glob("espeakbridge*.so"))), None) if piper else None
    if piper is not None and bridge is not None:
        data = str(piper / "espeak-ng-data")
        builds.append(Build("bridge", "piper-tts's espeak-ng (control)", str(bridge), data,
                            control=True))
        builds.append(Build("bridge+api", "piper-tts's espeak-ng, terminator API (control)",
                            str(bridge), data, terminator_api=True, control=True))
    return builds


def available_references() -> list[tuple[str, str]]:
    refs = [("piper-tts", "current Piper runtime")]
    if _package_dir("piper_phonemize") is not None:
        refs.append(("training", "Piper 1.0 training phonemizer"))
    return refs


def _run_worker(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("TTS_AGENT_ESPEAK_LIBRARY", None)
    env.pop("TTS_AGENT_ESPEAK_DATA", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker {' '.join(args[:2])} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# ---------------------------------------------------------------------------------------------
# What the voice was trained on


def untrained_ids(voice_dir: Path) -> set[int] | None:
    """Ids whose phoneme-embedding row training never moved (None: cannot tell).

    Rows past the id map are never used, so their norms show what an untouched row looks like;
    a mapped id whose row is no larger than 1.25 times the largest of those was never trained.
    """
    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper
    except ImportError:
        return None
    model_path, config_path = _voice_files(voice_dir)
    config = json.loads(config_path.read_text(encoding="utf-8"))
    mapped = {i for ids in config["phoneme_id_map"].values() for i in ids}
    symbols = int(config.get("num_symbols", 0))
    tables = [numpy_helper.to_array(t) for t in onnx.load(str(model_path)).graph.initializer
              if len(t.dims) == 2 and t.dims[0] == symbols]
    if len(tables) != 1 or symbols <= max(mapped) + 8:
        return None
    norms = np.linalg.norm(tables[0], axis=1)
    limit = 1.25 * float(max(norms[i] for i in range(symbols) if i not in mapped))
    return {i for i in mapped if float(norms[i]) <= limit}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--voice-dir", type=Path, default=DEFAULT_VOICE_DIR)
    parser.add_argument("--builds", default="",
                        help="comma-separated build keys (default: every one installed)")
    parser.add_argument("--summary-only", action="store_true", help="skip the mismatch lists")
    parser.add_argument("--json", type=Path, help="also write the full results here")
    parser.add_argument("--worker", choices=["piper-tts", "training", "ours"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--library", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--terminator-api", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    corpus = [line.strip() for line in args.corpus.read_text(encoding="utf-8").splitlines()]
    corpus = [line for line in corpus if line and not line.startswith("#")]
    workers = {
        "piper-tts": lambda: _worker_piper_tts(corpus, args.voice_dir),
        "training": lambda: _worker_training(corpus, args.voice_dir),
        "ours": lambda: _worker_ours(corpus, args.voice_dir, args.library, args.data,
                                     args.terminator_api),
    }
    if args.worker:
        print(json.dumps(workers[args.worker](), ensure_ascii=False))
        return 0

    common = ["--corpus", str(args.corpus), "--voice-dir", str(args.voice_dir)]
    builds = available_builds()
    if args.builds:
        wanted = set(args.builds.split(","))
        builds = [b for b in builds if b.key in wanted]
    if _package_dir("piper") is None:
        raise SystemExit("the reference runtime is missing: .venv/bin/pip install piper-tts")
    refs = {key: _run_worker(["--worker", key, *common]) for key, _ in available_references()}
    outputs = {}
    for build in builds:
        extra = ["--library", build.library] if build.library else []
        extra += ["--data", build.data] if build.data else []
        extra += ["--terminator-api"] if build.terminator_api else []
        outputs[build.key] = _run_worker(["--worker", "ours", *common, *extra])
    scores = [score(build, outputs[build.key], key, ref)
              for key, ref in refs.items() for build in builds]

    untrained = untrained_ids(args.voice_dir)
    id_map = json.loads(_voice_files(args.voice_dir)[1].read_text(encoding="utf-8"))[
        "phoneme_id_map"]
    hits: dict[str, Counter[str] | None] = {
        key: (untrained_hits(result["lines"], untrained, id_map) if untrained is not None
              else None)
        for key, result in [*refs.items(), *outputs.items()]}
    print(report(scores, refs, hits, len(corpus), args.summary_only))
    if args.json:
        args.json.write_text(json.dumps({
            "references": {k: {"version": r["version"], "package": r["package"]}
                           for k, r in refs.items()},
            "untrained_symbols": {k: dict(v) if v is not None else None
                                  for k, v in hits.items()},
            "scores": [{"build": s.build.key, "reference": s.reference, "version": s.version,
                        "sentences": s.sentences, "identical": s.identical,
                        "reference_ids": s.reference_ids, "edits": s.edits,
                        "grouping": s.grouping, "mismatches": [vars(m) for m in s.mismatches],
                        "word_diffs": s.word_diffs} for s in scores],
        }, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
