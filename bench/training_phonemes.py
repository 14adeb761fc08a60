"""The training phonemizer's ids for the parity corpus, recorded once as a reference.

    .venv/bin/python bench/training_phonemes.py [--every N] [--out FILE]

Runs piper-phonemize 1.1.0 (the phonemizer the voice was trained with; bench-only, installed as
docs/text.md#rerunning-the-parity-bench says) over ``bench/corpus/parity.txt`` (every Nth line;
default all) and writes each line's sentences, phoneme ids and clauses, and each word's
phonemes (what the bench's diagnosis of a mismatch reads), to
``tests/fixtures/training_phonemes.json``. tests/integration/test_espeak_builds.py compares the
agent's default frontend with it, and ``bench/phoneme_parity.py --reference-file`` scores a
platform with no piper-phonemize wheel for its Python (the platform matrix) against it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from phoneme_parity import DEFAULT_CORPUS, DEFAULT_VOICE_DIR, ROOT, _run_worker

OUT = ROOT / "tests" / "fixtures" / "training_phonemes.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--every", type=int, default=1, help="take every Nth corpus line")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    lines = [line.strip() for line in DEFAULT_CORPUS.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")][::args.every]
    with tempfile.TemporaryDirectory() as work:
        sample = Path(work) / "sample.txt"
        sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
        ref = _run_worker(["--worker", "training", "--corpus", str(sample),
                           "--voice-dir", str(DEFAULT_VOICE_DIR)])
    every = "every line" if args.every == 1 else f"every {args.every}th line"
    head = {"reference": f"{ref['package']} (espeak-ng {ref['version']})",
            "package": ref["package"], "version": ref["version"],
            "corpus": f"{DEFAULT_CORPUS.relative_to(ROOT)}, {every}", "words": ref["words"]}
    rows = [json.dumps({key: line[key] for key in ("text", "sentences", "ids", "clauses")},
                       ensure_ascii=False) for line in ref["lines"]]
    text = json.dumps(head, ensure_ascii=False)[:-1] + ', "lines": [\n' + ",\n".join(rows)
    args.out.write_text(text + "\n]}\n", encoding="utf-8")
    print(f"{len(rows)} lines from {head['reference']} in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
