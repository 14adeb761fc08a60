"""What ``compare_piper.py`` prints and records: its table, the streaming-off and daemon lines,
and the same results as figures for ``bench/results/compare_piper.json``."""

from __future__ import annotations

from typing import Any

from results import Figures

ENGINES = ("ours-int8", "ours-fp32", "piper")
WHOLE = "ours-int8-whole"
"""Our int8 voice with streaming off (every sentence decoded whole): speed and first audio only."""
LABELS = {"ours-int8": "ours int8", "ours-fp32": "ours fp32", "piper": "piper",
          WHOLE: "ours int8, streaming off"}
LOWER = (("ttfa_1", "first audio, 3-sentence paragraph, 1 thr", "ms", 1000.0),
         ("ttfa_2", "first audio, 3-sentence paragraph, 2 thr", "ms", 1000.0),
         ("ttfa_cached", "first audio, repeated phrase (our cache)", "ms", 1000.0),
         ("startup_cold", "start-up to first audio, first start", "ms", 1000.0),
         ("startup", "start-up to first audio, later starts", "ms", 1000.0),
         ("rss", "peak RSS (that process)", "MiB", 1.0))
"""The rows where lower is better: results key, label, unit, scale from the results' unit."""
WER = (("wer", "word error rate, default noise"), ("wer_noise0", "word error rate, noise scales 0"))


def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, ...]] = []

    def speed_row(label: str, key: str) -> None:
        values = results[key]
        speed = {k: 1.0 / v for k, v in values.items()}
        rows.append((label, *(f"{speed[e]:.1f}x" for e in ENGINES),
                     f"{speed['ours-int8'] / speed['piper']:.2f}x faster"))

    def lower_row(label: str, key: str, unit: str, scale: float = 1.0) -> None:
        values = results[key]

        def fmt(value: float) -> str:
            return f"{value:.0f}" if value >= 10 else f"{value:.2f}"

        ratio = values["ours-int8"] / values["piper"]
        rows.append((label, *(f"{fmt(values[e] * scale)} {unit}" for e in ENGINES),
                     f"{ratio:.2f}x" if ratio >= 0.01 else f"{ratio:.4f}x"))

    speed_row("synthesis speed, 1 thread (1/RTF)", "rtf_1")
    speed_row("synthesis speed, 2 threads (1/RTF)", "rtf_2")
    lower_row("first audio, 3-sentence paragraph, 1 thr", "ttfa_1", "ms", 1000)
    lower_row("first audio, 3-sentence paragraph, 2 thr", "ttfa_2", "ms", 1000)
    lower_row("first audio, repeated phrase (our cache)", "ttfa_cached", "ms", 1000)
    lower_row("start-up to first audio, first start", "startup_cold", "ms", 1000)
    lower_row("start-up to first audio, later starts", "startup", "ms", 1000)
    lower_row("peak RSS (that process)", "rss", "MiB")
    for key, label in (("wer", "word error rate, default noise"),
                       ("wer_noise0", "word error rate, noise scales 0")):
        wer = results[key]
        rows.append((label, *(f"{wer[e] * 100:.1f} %" for e in ENGINES),
                     f"{(wer['ours-int8'] - wer['piper']) * 100:+.1f} pts"))
    header = ("median", "ours int8", "ours fp32", "piper", "int8 vs piper")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def streaming_off(results: dict[str, Any]) -> str:
    """What streaming costs and buys: our int8 voice with every sentence decoded whole."""
    def speed(key: str) -> str:
        ours_whole, piper_rtf = results[key][WHOLE], results[key]["piper"]
        return f"{1 / ours_whole:.1f}x ({piper_rtf / ours_whole:.2f}x piper)"

    def first(key: str) -> str:
        ours_whole, piper_s = results[key][WHOLE], results[key]["piper"]
        return f"{ours_whole * 1000:.0f} ms ({ours_whole / piper_s:.2f}x)"

    return (f"int8 with streaming off (synthesis.stream_first_frames = 0): speed {speed('rtf_1')} "
            f"at 1 thread, {speed('rtf_2')} at 2; paragraph first audio {first('ttfa_1')} at 1 "
            f"thread, {first('ttfa_2')} at 2")


def daemon_lines(results: dict[str, Any]) -> str:
    """The agent as deployed against Piper's start-up (spawn to first audio) and peak RSS, and
    what the fixed stack alone costs of both."""
    daemon = results["daemon"]
    piper_s, piper_rss = results["startup"]["piper"], results["rss"]["piper"]
    lines = [f"agent daemon (python -m agent run, threads from the hardware profile): spawn -> "
             f"READY=1 {daemon['ready_s'] * 1000:.0f} ms = {daemon['ready_s'] / piper_s:.2f}x "
             f"piper's spawn -> first audio (first start {daemon['ready_cold_s'] * 1000:.0f} ms); "
             f"peak RSS after speaking the paragraph over MQTT {daemon['rss_mib']:.0f} MiB = "
             f"{daemon['rss_mib'] / piper_rss:.2f}x piper's"]
    for label, cost in daemon["stack"].items():
        lines.append(f"  {label} alone: {cost['s'] * 1000:.0f} ms = {cost['s'] / piper_s:.2f}x "
                     f"piper's start-up, {cost['rss_mib']:.0f} MiB = "
                     f"{cost['rss_mib'] / piper_rss:.2f}x piper's peak RSS")
    return "\n".join(lines)


def _speed_rows(figures: Figures, results: dict[str, Any]) -> list[list[str | None]]:
    rows: list[list[str | None]] = []
    for threads in (1, 2):
        values = results[f"rtf_{threads}"]
        row: list[str | None] = [f"synthesis speed, {threads} thread{'s' * (threads > 1)} (1/RTF)"]
        for engine in ENGINES:
            row.append(figures.add(
                f"speed_{threads}.{engine}", 1.0 / values[engine], "x",
                f"{LABELS[engine]}: audio seconds per second of compute (text to audio), median "
                f"over the sentences, {threads} onnxruntime thread(s)"))
        row.append(figures.add(f"speed_{threads}.int8_vs_piper",
                               values["piper"] / values["ours-int8"], "x",
                               f"ours int8 speed / piper's speed, {threads} thread(s)"))
        rows.append(row)
    return rows


def _lower_rows(figures: Figures, results: dict[str, Any]) -> list[list[str | None]]:
    rows: list[list[str | None]] = []
    for key, label, unit, scale in LOWER:
        values = results[key]
        rows.append([label, *(figures.add(f"{key}.{engine}", values[engine] * scale, unit,
                                          f"{LABELS[engine]}: {label}, median")
                              for engine in ENGINES),
                     figures.add(f"{key}.int8_vs_piper", values["ours-int8"] / values["piper"],
                                 "x", f"ours int8 / piper: {label} (below 1: ours is lower)")])
    for key, label in WER:
        values = results[key]
        rows.append([label, *(figures.add(f"{key}.{engine}", values[engine] * 100, "%",
                                          f"{LABELS[engine]}: pocketsphinx {label}")
                              for engine in ENGINES),
                     figures.add(f"{key}.int8_vs_piper",
                                 (values["ours-int8"] - values["piper"]) * 100, "pts",
                                 f"ours int8 - piper: {label} (percentage points)", signed=True)])
    return rows


def _streaming_off_rows(figures: Figures, results: dict[str, Any]) -> list[list[str | None]]:
    rows: list[list[str | None]] = []
    for threads in (1, 2):
        values = results[f"rtf_{threads}"]
        rows.append([f"synthesis speed, {threads} thread{'s' * (threads > 1)} (1/RTF)",
                     figures.add(f"speed_{threads}.{WHOLE}", 1.0 / values[WHOLE], "x",
                                 f"{LABELS[WHOLE]}: audio seconds per second of compute"),
                     figures.add(f"speed_{threads}.whole_vs_piper",
                                 values["piper"] / values[WHOLE], "x",
                                 "ours int8 with streaming off: speed / piper's")])
    for threads in (1, 2):
        values = results[f"ttfa_{threads}"]
        rows.append([f"first audio, 3-sentence paragraph, {threads} thr",
                     figures.add(f"ttfa_{threads}.{WHOLE}", values[WHOLE] * 1000, "ms",
                                 f"{LABELS[WHOLE]}: first audio of the paragraph, median"),
                     figures.add(f"ttfa_{threads}.whole_vs_piper", values[WHOLE] / values["piper"],
                                 "x", "ours int8 with streaming off: first audio / piper's")])
    return rows


def _daemon_rows(figures: Figures, results: dict[str, Any]) -> list[list[str | None]]:
    daemon = results["daemon"]
    piper_s, piper_rss = results["startup"]["piper"], results["rss"]["piper"]
    rows: list[list[str | None]] = [
        ["daemon spawn -> READY=1, later starts",
         figures.add("daemon.ready", daemon["ready_s"] * 1000, "ms",
                     "python -m agent run from spawn to READY=1, median of the later starts"),
         figures.add("daemon.ready_vs_piper", daemon["ready_s"] / piper_s, "x",
                     "daemon spawn -> READY=1 / piper's spawn -> first audio")],
        ["daemon spawn -> READY=1, first start",
         figures.add("daemon.ready_cold", daemon["ready_cold_s"] * 1000, "ms",
                     "python -m agent run from spawn to READY=1, empty optimised-model cache"),
         None],
        ["daemon spawn -> READY=1, first start after `tts-agent prepare`",
         figures.add("daemon.ready_prepared", daemon["ready_prepared_s"] * 1000, "ms",
                     "python -m agent run from spawn to READY=1, a cache prepare filled"),
         None],
        ["daemon peak RSS (with its PCM helper) after speaking the paragraph over MQTT",
         figures.add("daemon.rss", daemon["rss_mib"], "MiB",
                     "VmHWM of the daemon and its PCM helper, summed, median"),
         figures.add("daemon.rss_vs_piper", daemon["rss_mib"] / piper_rss, "x",
                     "daemon peak RSS / piper's peak RSS")]]
    for n, (label, cost) in enumerate(daemon["stack"].items()):
        rows.append([f"{label} alone: start-up",
                     figures.add(f"stack_{n}.startup", cost["s"] * 1000, "ms",
                                 f"spawn to exit of a process that only runs: {label}"),
                     figures.add(f"stack_{n}.startup_vs_piper", cost["s"] / piper_s, "x",
                                 "that / piper's start-up")])
        rows.append([f"{label} alone: peak RSS",
                     figures.add(f"stack_{n}.rss", cost["rss_mib"], "MiB",
                                 f"peak RSS of a process that only runs: {label}"),
                     figures.add(f"stack_{n}.rss_vs_piper", cost["rss_mib"] / piper_rss, "x",
                                 "that / piper's peak RSS")])
    return rows


def record(results: dict[str, Any]) -> Figures:
    """The results as figures, in the tables the bench prints."""
    figures = Figures()
    figures.table("Ours against piper-tts, same voice, same sentences",
                  ["median", *(LABELS[e] for e in ENGINES), "int8 vs piper"],
                  _speed_rows(figures, results) + _lower_rows(figures, results),
                  note="1/RTF: audio seconds per second of compute. Speed rows: ours int8 speed / "
                       "piper's (above 1: ours is faster); time and memory rows: ours int8 / "
                       "piper (below 1: ours is lower); word error rates: ours int8 - piper. "
                       "Ours runs its default text stages (the normalizer on, emoji dropped), "
                       "as the agent does; piper-tts reads the text as written.")
    figures.table("Ours int8 with streaming off (synthesis.stream_first_frames = 0)",
                  ["median", "ours int8, streaming off", "vs piper"],
                  _streaming_off_rows(figures, results),
                  note="Every sentence decoded whole. Speed: ours / piper's (above 1: faster); "
                       "first audio: ours / piper's (below 1: sooner).")
    figures.table("The agent as deployed (bench/daemon_startup.py) against piper-tts",
                  ["median", "ours", "vs piper"], _daemon_rows(figures, results),
                  note="Against piper's spawn to first audio and piper's peak RSS in the first "
                       "table; the fixed stack (interpreter and libraries) is what every start "
                       "pays before our code runs.")
    return figures
