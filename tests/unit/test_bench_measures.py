"""What bench/wyoming_peers.py reads of wyoming-bench's report: each server's measurements by
mode as the tool prints them (its ``-v`` lines), failures and skipped modes left out, and the
ratios only where both servers were measured.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
REPORT = """\
wyoming-bench 2026.10.0 (tts)
=== 127.0.0.1:57601 (tts-agent) ===
[warmup:non_streaming] ok
[non_streaming] r0 sent=2 ttft=1019ms total=6991ms audio=5.22s bytes=230400 cycles=1
[non_streaming] r1 FAIL: timed out
[streaming] r0 sent=2 ttft=1238ms total=6811ms audio=4.95s bytes=218112 cycles=1

Server: 127.0.0.1:57601 (tts-agent)
[non_streaming] ok=1 fail=1
=== 127.0.0.1:42135 (piper) ===
  [streaming] NOT SUPPORTED by 127.0.0.1:42135 (no audio in response to synthesize-*)
[non_streaming] r0 sent=2 ttft=1693ms total=8601ms audio=6.03s bytes=265000 cycles=2
"""


def bench_module(name: str) -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
        for module in (name, "results", "workload"):
            sys.modules.pop(module, None)


@pytest.fixture
def peers() -> Iterator[ModuleType]:
    yield from bench_module("wyoming_peers")


def test_wyoming_bench_s_report_is_read_per_server_and_mode(peers: ModuleType) -> None:
    got = peers.parse(REPORT, {57601: "tts-agent", 42135: "wyoming-piper"})
    assert got == {"tts-agent": {"non_streaming": [[1.019, 6.991, 5.22]],
                                 "streaming": [[1.238, 6.811, 4.95]]},
                   "wyoming-piper": {"non_streaming": [[1.693, 8.601, 6.03]]}}
    by_mode: dict[str, dict[str, list[list[float]]]] = {}
    for server, modes in got.items():
        for mode, rows in modes.items():
            by_mode.setdefault(mode, {})[server] = rows
    summary = peers.summarize({"1": by_mode})["1"]
    assert summary["non_streaming"]["ttft_ratio"] == pytest.approx(1.019 / 1.693)
    assert "ttft_ratio" not in summary["streaming"]  # one server only: no ratio
