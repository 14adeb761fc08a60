"""What ``quant_recipes.py`` prints and records: its Markdown table of recipes and the same
results as figures for ``bench/results/quant_recipes.json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from results import Figures


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table_row(label: str, result: dict[str, Any]) -> str:
    if "error" in result:
        error = result["error"]
        return f"| {label} | failed: {cell(error[:200])} | - | - | - | - |"
    quality, wer = result["quality"], result["wer"]
    changed = result["durations_changed"]
    if changed:
        durations, snr, mel = f"**changed** ({changed}/{quality['sentences']})", "-", "-"
    else:
        snr = f"{quality['spectral_snr_db']['min']:.1f} dB"
        mel = (f"{quality['mel_distance_db']['median']:.1f} / "
               f"{quality['mel_distance_db']['max']:.1f} dB")
        durations = "same"
    return (f"| {label} | {result['speed']:.2f}x | {durations} | {snr} | {mel} | "
            f"{wer['noise0'] * 100:.1f} / {wer['default_noise'] * 100:.1f} % |")


def table(results: Sequence[dict[str, Any]]) -> str:
    lines = ["| recipe (min/max unless noted) | speed | durations | spectral SNR min "
             "| mel median / max | WER |", "|---|---|---|---|---|---|"]
    lines += [table_row(cell(r["label"]), r) for r in results]
    return "\n".join(lines)



def record(fp32_wer: dict[str, float], results: Sequence[dict[str, Any]]) -> Figures:
    """The table's rows as figures (a failed recipe keeps its error as text)."""
    figures = Figures()
    figures.table("fp32 word error rate", ["", "noise 0", "default noise"], [[
        "fp32", figures.add("fp32.wer_noise0", fp32_wer["noise0"] * 100, "%",
                            "fp32 voice: pocketsphinx word error rate, noise scales 0"),
        figures.add("fp32.wer_noise", fp32_wer["default_noise"] * 100, "%",
                    "fp32 voice: word error rate, default noise (fixed seed)")]])
    rows: list[list[str | None]] = []
    for result in results:
        key, label = f"row_{result['row']}", f"{result['row']}. {result['label']}"
        if "error" in result:
            rows.append([label, figures.add(f"{key}.error", result["error"][:200], "",
                                            f"{label}: failed"), None, None, None, None, None,
                         None])
            continue
        quality, wer = result["quality"], result["wer"]
        rows.append([label, *(figures.add(f"{key}.{name}", value, unit, f"{label}: {what}")
                              for name, value, unit, what in (
            ("speed", result["speed"], "x", "fp32 time / int8 time, median over inputs"),
            ("durations_changed", result["durations_changed"], "",
             "held-out inputs whose sample count differs from fp32"),
            ("snr_min", quality["spectral_snr_db"]["min"], "dB", "lowest spectral SNR"),
            ("mel_median", quality["mel_distance_db"]["median"], "dB", "median log-mel distance"),
            ("mel_max", quality["mel_distance_db"]["max"], "dB", "largest log-mel distance"),
            ("wer_noise0", wer["noise0"] * 100, "%", "word error rate, noise scales 0"),
            ("wer_noise", wer["default_noise"] * 100, "%", "word error rate, default noise")))])
    figures.table("INT8 recipes against fp32 (min/max calibration unless noted)",
                  ["recipe", "speed", "durations changed", "spectral SNR min", "mel median",
                   "mel max", "WER noise 0", "WER default noise"], rows)
    return figures
