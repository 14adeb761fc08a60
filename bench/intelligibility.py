"""Is the int8 voice as intelligible as fp32 (and Piper)? Word error rates with confidence
intervals over a larger set of sentences than ``compare_piper.py`` uses.

    .venv/bin/python bench/intelligibility.py [--sentences bench/corpus/intelligibility.txt]
        [--limit N] [--threads 2] [--resamples 2000] [--json PATH]

Each engine of ``compare_piper.py`` (ours int8 as shipped, ours fp32, piper-tts on the same
voice) says every sentence; pocketsphinx (its wheel's English model) transcribes it; the word
errors (edit distance) are counted per sentence against the text. Done at the voice's default
noise scales (what users hear; random) and with noise scales 0 (deterministic).

The differences int8 - fp32 and int8 - piper are paired by sentence: the 95 % interval comes
from a bootstrap over sentences (``--resamples`` draws, fixed seed). An interval that contains
0 means the difference is within what these sentences can tell apart. The sentences
(``bench/corpus/intelligibility.txt``) are plain words, so the text is what should be heard.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from compare_piper import ENGINES, Recogniser, edit_distance, make_engine, resolve, words
from results import Figures, add_json_option, write_result
from workload import CORPUS, ROOT, read_lines

SENTENCES = CORPUS / "intelligibility.txt"


def errors_per_sentence(noise: bool, sentences: list[str], bundle_dir: Path, threads: int,
                        rate: int) -> dict[str, np.ndarray]:
    """Word errors of each engine on each sentence (and the reference word counts, ``words``)."""
    engines = {n: make_engine(n, bundle_dir, threads, "int8", noise=noise) for n in ENGINES}
    recogniser = Recogniser()
    out = {name: np.zeros(len(sentences)) for name in (*ENGINES, "words")}
    for k, text in enumerate(sentences):
        reference = words(text)
        out["words"][k] = len(reference)
        for name, synth in engines.items():
            audio = np.concatenate(list(synth(text)))
            out[name][k] = edit_distance(reference, words(recogniser.text(audio, rate)))
    return out


def interval(errors: dict[str, np.ndarray], a: str, b: str, resamples: int
             ) -> tuple[float, float, float]:
    """WER(a) - WER(b) and its bootstrap 95 % interval (percentage points), paired by sentence."""
    rng = np.random.default_rng(7)
    n = errors["words"].size
    picks = rng.integers(0, n, size=(resamples, n))
    total = errors["words"][picks].sum(axis=1)
    diffs = (errors[a][picks].sum(axis=1) - errors[b][picks].sum(axis=1)) / total * 100
    point = (errors[a].sum() - errors[b].sum()) / errors["words"].sum() * 100
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(point), float(low), float(high)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--sentences", type=Path, default=SENTENCES)
    parser.add_argument("--limit", type=int, help="only the first N sentences of the file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=2000)
    add_json_option(parser, "intelligibility")
    args = parser.parse_args()
    from agent.logs import configure_logging
    from agent.voice.voice import VoiceConfig

    configure_logging("warning")
    bundle_dir = resolve(args.models_dir)
    rate = VoiceConfig.from_file(next(bundle_dir.glob("*.onnx.json"))).sample_rate
    sentences = read_lines(args.sentences)[:args.limit]
    print(f"{len(sentences)} sentences from {args.sentences.name}; pocketsphinx word error rate; "
          f"difference = WER(int8) - WER(other), 95 % bootstrap interval over sentences")
    figures = Figures()
    for noise, label in ((True, "default noise"), (False, "noise scales 0")):
        errors = errors_per_sentence(noise, sentences, bundle_dir, args.threads, rate)
        total = errors["words"].sum()
        rates = ", ".join(f"{n} {errors[n].sum() / total * 100:.1f} %" for n in ENGINES)
        print(f"\n{label}: {int(total)} words; {rates}")
        differences = {}
        for other in ("ours-fp32", "piper"):
            point, low, high = interval(errors, "ours-int8", other, args.resamples)
            verdict = "within noise" if low <= 0 <= high else (
                "int8 worse" if low > 0 else "int8 better")
            print(f"  int8 vs {other}: {point:+.1f} pts [{low:+.1f}, {high:+.1f}] -> {verdict}")
            differences[other] = (point, low, high, verdict)
        record(figures, "noise" if noise else "noise0", label, errors, differences)
    write_result("intelligibility", figures, args)
    return 0


def record(figures: Figures, key: str, label: str, errors: dict[str, np.ndarray],
           differences: dict[str, tuple[float, float, float, str]]) -> None:
    """One noise setting's word error rates and int8's paired differences, as figures."""
    total = float(errors["words"].sum())
    words = figures.add(f"{key}.words", int(total), "", f"words in the sentences, {label}")
    figures.table(f"Word error rate, {label}", ["engine", "WER", "words"], [
        [name, figures.add(f"{key}.wer.{name}", errors[name].sum() / total * 100, "%",
                           f"{name}: pocketsphinx word error rate, {label}"),
         words if name == ENGINES[0] else None]
        for name in ENGINES])
    rows: list[list[str | None]] = []
    for other, (point, low, high, verdict) in differences.items():
        what = f"WER(ours int8) - WER({other}), {label}, percentage points"
        rows.append([f"int8 vs {other}",
                     figures.add(f"{key}.diff.{other}", point, "pts", what, signed=True),
                     figures.add(f"{key}.diff_low.{other}", low, "pts",
                                 f"{what}: 95 % bootstrap interval, lower end", signed=True),
                     figures.add(f"{key}.diff_high.{other}", high, "pts",
                                 f"{what}: 95 % bootstrap interval, upper end", signed=True),
                     figures.add(f"{key}.verdict.{other}", verdict, "",
                                 "whether the interval contains 0 (within noise)")])
    figures.table(f"Paired difference, {label}", ["", "difference", "95 % low", "95 % high",
                                                   "verdict"], rows)


if __name__ == "__main__":
    sys.exit(main())
