"""Phoneme-id parity of our text frontend with the reference Piper runtime (piper-tts).

    .venv/bin/python bench/phoneme_parity.py [--corpus FILE] [--voice-dir DIR] [--builds K,K]
                                             [--build KEY=LIBRARY:DATA] [--summary-only]
                                             [--json OUT]

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

* ``default``: what the agent loads with nothing set (``agent.text.espeak_build.choose``): the
  training build that ./build.sh unpacks into the venv, else the system library;
* ``system``: the distribution's ``libespeak-ng1`` (Debian 12: 1.51, Debian 13: 1.52);
* ``wheel``: the ``espeakng-loader`` wheel's upstream 1.52.0 (x86_64 only), as Debian 13's 1.52
  would read, with terminators recovered from the text (``wheel``) or, where the wheel's
  library exports it, read through ``espeak_TextToPhonemesWithTerminator`` (``wheel+api``);
* ``--build KEY=LIBRARY:DATA``: any other, e.g. Debian 13's ``libespeak-ng1`` copied out of a
  root, read through the call where it has it (as the agent does);
* controls: ``training-lib`` and ``training-lib+api`` (the library inside piper-phonemize,
  terminators recovered or through the call), ``bridge`` and ``bridge+api`` (the one inside
  piper-tts). A control that matches its own reference proves our segmentation, grouping and
  id mapping; what is left on the other builds is the espeak-ng dictionary.

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
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from parity_score import Build, Score, record, report, score, untrained_hits
from results import add_json_option, write_result

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
            "build": phonemizer.build, "terminator_api": phonemizer.terminator_api,
            "lines": lines, "words": words}


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


# ---------------------------------------------------------------------------------------------
# What is installed: builds and references


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
    builds = [Build("default", "the agent's default build", terminator_api=True),
              Build("system", "system libespeak-ng1", "system", terminator_api=True)]
    wheel = _package_dir("espeakng_loader")
    if wheel is not None and (wheel / "libespeak-ng.so").exists():
        library, data = str(wheel / "libespeak-ng.so"), str(wheel / "espeak-ng-data")
        builds.append(Build("wheel", "espeakng-loader wheel", library, data))
        if _exports_terminator_call(library):
            builds.append(Build("wheel+api", "espeakng-loader wheel, terminator API", library,
                                data, terminator_api=True))
    if _package_dir("piper_phonemize") is not None:
        library, data = _training_library()
        builds.append(Build("training-lib", "piper-phonemize's espeak-ng (control)", library,
                            data, control=True))
        builds.append(Build("training-lib+api", "piper-phonemize's espeak-ng, terminator API"
                            " (control)", library, data, terminator_api=True, control=True))
    piper = _package_dir("piper")
    bridge = next(iter(sorted(piper.glob("espeakbridge*.so"))), None) if piper else None
    if piper is not None and bridge is not None:
        data = str(piper / "espeak-ng-data")
        builds.append(Build("bridge", "piper-tts's espeak-ng (control)", str(bridge), data,
                            control=True))
        builds.append(Build("bridge+api", "piper-tts's espeak-ng, terminator API (control)",
                            str(bridge), data, terminator_api=True, control=True))
    return builds


def _exports_terminator_call(library: str) -> bool:
    """Whether the library names espeak_TextToPhonemesWithTerminator (not loaded here: the
    builds meet only in their own workers)."""
    return b"espeak_TextToPhonemesWithTerminator" in Path(library).read_bytes()


def _extra_build(spec: str) -> Build:
    """``--build KEY=LIBRARY:DATA``: another build, e.g. a distribution's copied from a root."""
    key, _, paths = spec.partition("=")
    library, _, data = paths.partition(":")
    if not (key and library and data):
        raise SystemExit(f"--build {spec!r}: expected KEY=LIBRARY:DATA")
    return Build(key, f"{library} (given)", library, data, terminator_api=True)


def available_references() -> list[tuple[str, str]]:
    refs = [("piper-tts", "current Piper runtime")]
    if _package_dir("piper_phonemize") is not None:
        refs.append(("training", "Piper 1.0 training phonemizer"))
    return refs


def references(recorded: Path | None, common: list[str]) -> dict[str, dict[str, Any]]:
    """The references' outputs: run live (piper-tts, and piper-phonemize where installed), or
    the training phonemizer's, read from ``recorded`` (its lines must be the corpus's)."""
    if recorded is None:
        if _package_dir("piper") is None:
            raise SystemExit("the reference runtime is missing: .venv/bin/pip install piper-tts")
        return {key: _run_worker(["--worker", key, *common]) for key, _ in available_references()}
    document = json.loads(recorded.read_text(encoding="utf-8"))
    return {"training": {"version": document["version"], "package": document["package"],
                         "lines": document["lines"], "words": document.get("words", {})}}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--voice-dir", type=Path, default=DEFAULT_VOICE_DIR)
    parser.add_argument("--builds", default="",
                        help="comma-separated build keys (default: every one installed)")
    parser.add_argument("--build", action="append", default=[],
                        metavar="KEY=LIBRARY:DATA",
                        help="one more build (terminators through the call where it has it)")
    parser.add_argument("--summary-only", action="store_true", help="skip the mismatch lists")
    parser.add_argument("--reference-file", type=Path, metavar="FILE",
                        help="score against the training ids recorded in FILE "
                             "(bench/training_phonemes.py) instead of running the references")
    add_json_option(parser, "phoneme_parity")
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
    builds = [*available_builds(), *map(_extra_build, args.build)]
    if args.builds:
        wanted = set(args.builds.split(","))
        builds = [b for b in builds if b.key in wanted]
    refs = references(args.reference_file, common)
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
    figures = record(scores, refs, hits, len(corpus))
    if "default" in outputs:
        default = outputs["default"]
        print(f"default: the {default['build']} build, {default['package']}")
        figures.add("default.build", default["build"], "",
                    "default: the build the agent loads with nothing set")
    write_result("phoneme_parity", figures, args, raw=details(scores, refs, hits))
    return 0


def details(scores: list[Score], refs: dict[str, dict[str, Any]],
            hits: dict[str, Counter[str] | None]) -> dict[str, Any]:
    """Everything the comparison found (the mismatch lists included), as JSON."""
    return {
        "references": {k: {"version": r["version"], "package": r["package"]}
                       for k, r in refs.items()},
        "untrained_symbols": {k: dict(v) if v is not None else None for k, v in hits.items()},
        "scores": [{"build": s.build.key, "reference": s.reference, "version": s.version,
                    "sentences": s.sentences, "identical": s.identical,
                    "reference_ids": s.reference_ids, "edits": s.edits,
                    "grouping": s.grouping, "mismatches": [vars(m) for m in s.mismatches],
                    "word_diffs": s.word_diffs} for s in scores],
    }


if __name__ == "__main__":
    raise SystemExit(main())
