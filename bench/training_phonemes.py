"""The training phonemizer's ids for a sample of the parity corpus, for the integration test.

    .venv/bin/python bench/training_phonemes.py [--every N] [--out FILE]

Runs piper-phonemize 1.1.0 (the phonemizer the voice was trained with; bench-only, installed as
docs/text.md#rerunning-the-parity-bench says) over every Nth line of
``bench/corpus/parity.txt`` and writes each line's sentences and phoneme ids to
``tests/fixtures/training_phonemes.json``, which tests/integration/test_espeak_builds.py
compares the agent's default frontend with, so the test needs no reference package.
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
    parser.add_argument("--every", type=int, default=4, help="take every Nth corpus line")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    lines = [line.strip() for line in DEFAULT_CORPUS.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")][::args.every]
    with tempfile.TemporaryDirectory() as work:
        sample = Path(work) / "sample.txt"
        sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
        ref = _run_worker(["--worker", "training", "--corpus", str(sample),
                           "--voice-dir", str(DEFAULT_VOICE_DIR)])
    head = {"reference": f"{ref['package']} (espeak-ng {ref['version']})",
            "corpus": f"{DEFAULT_CORPUS.relative_to(ROOT)}, every {args.every}th line"}
    rows = [json.dumps({"text": line["text"], "sentences": line["sentences"],
                        "ids": line["ids"]}, ensure_ascii=False) for line in ref["lines"]]
    text = json.dumps(head, ensure_ascii=False)[:-1] + ', "lines": [\n' + ",\n".join(rows)
    args.out.write_text(text + "\n]}\n", encoding="utf-8")
    print(f"{len(rows)} lines from {head['reference']} in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
