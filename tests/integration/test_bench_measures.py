"""A process tree's peak RSS, as bench/daemon_startup.py reads it, counts its helper processes
(the daemon's PCM helper, #26 item 4), not only the process it started.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
HELPER_MIB = 64


@pytest.fixture
def workload() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("workload")
    finally:
        sys.path.remove(str(BENCH))
        sys.modules.pop("workload", None)



def test_a_tree_s_peak_counts_its_helper_process(workload: ModuleType) -> None:
    grandchild = (f"import time; x = bytearray({HELPER_MIB} << 20); x[::4096] = b'1' * "
                  f"len(x[::4096]); print('up', flush=True); time.sleep(60)")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, "
         f"'-c', {grandchild!r}]); p.wait()"], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"up\n"
        peaks = workload.tree_hwm_kib(parent.pid)
        assert peaks["helpers"] >= HELPER_MIB * 1024
        assert peaks["main"] < HELPER_MIB * 1024  # the parent's own figure never held it
        assert workload.descendants(parent.pid)
    finally:
        for pid in workload.descendants(parent.pid):
            os.kill(pid, signal.SIGTERM)
        parent.wait(10)
