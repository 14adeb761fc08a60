"""Measuring synthesis speed per thread setting, and choosing the one to keep.

Used by ``tts-agent tune``. Everything here runs on the calling (main) thread: one voice is
loaded per configuration, warmed up, then timed over the same text ``repeats`` times with the
noise scales at zero, so every configuration produces exactly the same audio length.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.hardware.runtime import ModelVariant, ThreadAffinity
from agent.hardware.tune_store import TuneMeasurement

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile

__all__ = [
    "DEFAULT_TUNE_TEXT",
    "TuneConfig",
    "candidate_configs",
    "choose",
    "render_table",
    "thread_counts",
    "time_synthesis",
]

DEFAULT_TUNE_TEXT = (
    "Attention please. The next train to the central station departs from platform four in "
    "about five minutes. Please mind the gap between the train and the platform edge, and "
    "keep your belongings with you at all times."
)


@dataclass(frozen=True, slots=True)
class TuneConfig:
    """One configuration to measure."""

    variant: ModelVariant
    intra_op_threads: int
    thread_affinity: ThreadAffinity


def thread_counts(budget: int, extra: Iterable[int] = ()) -> list[int]:
    """Sensible intra-op thread counts up to ``budget``: every count up to 8, then steps."""
    counts = {n for n in range(1, min(budget, 8) + 1)}
    step = 8
    while step < budget:
        step = min(budget, step + max(2, step // 2))
        counts.add(step)
    counts.update(n for n in extra if 1 <= n <= budget)
    return sorted(counts)


def candidate_configs(
    profile: EffectiveProfile,
    variants: Sequence[ModelVariant],
    threads: Sequence[int] | None = None,
) -> list[TuneConfig]:
    """What to measure: each variant x each thread count; on heterogeneous CPUs also the
    counts that fit on the big cores with the threads pinned there."""
    hw = profile.hardware
    counts = list(threads) if threads else thread_counts(
        hw.cpu_budget, [profile.runtime.options.intra_op_threads])
    configs: list[TuneConfig] = []
    for variant in variants:
        for n in counts:
            configs.append(TuneConfig(variant, n, "none"))
            if hw.big_cpus and n <= len(hw.big_cpus):
                configs.append(TuneConfig(variant, n, "big_cores"))
    return configs


def time_synthesis(
    synthesize: Callable[[], float], repeats: int
) -> tuple[list[float], float]:
    """Run ``synthesize`` (returns seconds of audio produced) once to warm up, then ``repeats``
    times; returns the RTF of each timed run and the audio length."""
    audio_s = synthesize()
    if audio_s <= 0:
        raise ValueError("the voice produced no audio")
    rtfs = []
    for _ in range(repeats):
        started = time.monotonic()
        produced = synthesize()
        rtfs.append((time.monotonic() - started) / produced)
    return rtfs, audio_s


def measurement(config: TuneConfig, inter_op_threads: int, rtfs: Sequence[float],
                audio_s: float) -> TuneMeasurement:
    """A table row from the timed runs of ``config``."""
    return TuneMeasurement(
        variant=config.variant,
        intra_op_threads=config.intra_op_threads,
        inter_op_threads=inter_op_threads,
        thread_affinity=config.thread_affinity,
        rtf_median=round(statistics.median(rtfs), 6),
        rtf_best=round(min(rtfs), 6),
        runs=len(rtfs),
        audio_s=round(audio_s, 3),
    )


def choose(
    rows: Sequence[TuneMeasurement],
    *,
    tolerance: float = 0.05,
    preferred_variant: ModelVariant | None = None,
) -> TuneMeasurement:
    """The setting to keep: the fewest threads whose median RTF is within ``tolerance`` of the
    fastest (fewer busy cores leave room for audio and MQTT and run cooler); among equals the
    profile's preferred variant, then unpinned threads."""
    if not rows:
        raise ValueError("nothing was measured")
    fastest = min(r.rtf_median for r in rows)
    good = [r for r in rows if r.rtf_median <= fastest * (1 + tolerance)]
    return min(good, key=lambda r: (r.intra_op_threads, r.variant != preferred_variant,
                                    r.thread_affinity != "none", r.rtf_median))


def render_table(rows: Sequence[TuneMeasurement], chosen: TuneMeasurement | None) -> str:
    """A Markdown table (pastes straight into a README): RTF per configuration."""
    base = {r.variant: r.rtf_median for r in rows
            if r.intra_op_threads == 1 and r.thread_affinity == "none"}
    lines = [
        "| variant | threads | pinned | RTF median | RTF best | x real time | vs 1 thread | |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        speedup = base.get(r.variant)
        vs_one = f"{speedup / r.rtf_median:.2f}x" if speedup and r.rtf_median else "-"
        realtime = f"{1 / r.rtf_median:.1f}" if r.rtf_median else "-"
        mark = "**chosen**" if r == chosen else ""
        pinned = "big cores" if r.thread_affinity == "big_cores" else "-"
        lines.append(f"| {r.variant} | {r.intra_op_threads} | {pinned} | {r.rtf_median:.3f} | "
                     f"{r.rtf_best:.3f} | {realtime} | {vs_one} | {mark} |")
    return "\n".join(lines)
