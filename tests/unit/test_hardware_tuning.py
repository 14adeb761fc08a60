"""The tune command's choices: which settings to measure, which one to keep, the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.hardware.effective import resolve_profile
from agent.hardware.tune_store import TuneMeasurement
from agent.hardware.tuning import (
    candidate_configs,
    choose,
    render_table,
    thread_counts,
    time_synthesis,
)
from tests.support.hardware_support import settings, sysroot


def _row(threads: int, rtf: float, variant: str = "fp32",
         affinity: str = "none") -> TuneMeasurement:
    return TuneMeasurement.model_validate({
        "variant": variant, "intra_op_threads": threads, "inter_op_threads": 1,
        "thread_affinity": affinity, "rtf_median": rtf, "rtf_best": rtf, "runs": 3,
        "audio_s": 9.5})


def test_thread_counts_cover_small_machines_fully_and_big_ones_in_steps() -> None:
    assert thread_counts(1) == [1]
    assert thread_counts(4) == [1, 2, 3, 4]
    assert thread_counts(32) == [1, 2, 3, 4, 5, 6, 7, 8, 12, 18, 27, 32]
    assert thread_counts(4, [3, 9]) == [1, 2, 3, 4]


def test_big_little_boards_also_measure_pinned_settings(tmp_path: Path) -> None:
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rk3588"))
    configs = candidate_configs(eff, ["int8"])
    pinned = [c.intra_op_threads for c in configs if c.thread_affinity == "big_cores"]
    unpinned = [c.intra_op_threads for c in configs if c.thread_affinity == "none"]
    assert pinned == [1, 2, 3, 4]
    assert unpinned == list(range(1, 9))
    pi = resolve_profile(settings(tmp_path), sysroot=sysroot("rpi4"))
    assert {c.thread_affinity for c in candidate_configs(pi, ["fp32", "int8"])} == {"none"}
    assert len(candidate_configs(pi, ["fp32", "int8"], [2])) == 2


def test_choose_prefers_fewest_threads_within_tolerance() -> None:
    rows = [_row(1, 0.40), _row(2, 0.22), _row(3, 0.205), _row(4, 0.20)]
    assert choose(rows, tolerance=0.05).intra_op_threads == 3
    assert choose(rows, tolerance=0.0).intra_op_threads == 4
    assert choose(rows, tolerance=1.0).intra_op_threads == 1


def test_choose_breaks_ties_by_preferred_variant_then_unpinned() -> None:
    rows = [_row(2, 0.20, "fp32"), _row(2, 0.20, "int8"), _row(2, 0.20, "int8", "big_cores")]
    chosen = choose(rows, preferred_variant="int8")
    assert (chosen.variant, chosen.thread_affinity) == ("int8", "none")
    with pytest.raises(ValueError, match="nothing was measured"):
        choose([])


def test_table_marks_the_choice_and_the_speed_up() -> None:
    rows = [_row(1, 0.40), _row(2, 0.20)]
    table = render_table(rows, rows[1]).splitlines()
    assert table[0].startswith("| variant | threads | pinned | RTF median |")
    assert table[2] == "| fp32 | 1 | - | 0.400 | 0.400 | 2.5 | 1.00x |  |"
    assert table[3] == "| fp32 | 2 | - | 0.200 | 0.200 | 5.0 | 2.00x | **chosen** |"


def test_time_synthesis_warms_up_then_times_each_run() -> None:
    calls: list[int] = []

    def synthesize() -> float:
        calls.append(1)
        return 2.0

    rtfs, audio_s = time_synthesis(synthesize, 3)
    assert len(calls) == 4  # one warm-up run is not timed
    assert len(rtfs) == 3
    assert audio_s == 2.0
    with pytest.raises(ValueError, match="no audio"):
        time_synthesis(lambda: 0.0, 1)
