"""Helpers shared by the hardware-profile tests: fixture sysroots, a tiny ONNX model, threads."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agent.settings import Settings
from tests.support import REPO

SYSROOTS = REPO / "tests" / "fixtures" / "sysroots"
PROFILES = REPO / "firmware_profiles"


def sysroot(board: str) -> Path:
    path = SYSROOTS / board
    assert path.is_dir(), f"missing fixture {path}"
    return path


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings whose cache (and so the default tune file) lives in ``tmp_path``."""
    overrides.setdefault("cache", {"dir": str(tmp_path / "cache")})
    return Settings(device_id="t1", **overrides)


def write_matmul_model(path: Path, size: int = 64) -> np.ndarray:
    """A one-node ONNX model ``y = x @ W``; returns W so a test can check the output."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    weights = rng.standard_normal((size, size)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", size])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", size])],
        initializer=[numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return weights


def threads_now() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def new_threads(action: Callable[[], Any]) -> tuple[Any, set[str]]:
    """Run ``action``; return its result and the ids of the OS threads it started (and kept)."""
    gc.collect()  # sessions of earlier tests release their threads now, not during ``action``
    before = threads_now()
    result = action()
    return result, threads_now() - before


def thread_cpus(tid: str) -> str:
    """``Cpus_allowed_list`` of one thread of this process."""
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (threads pin themselves on start)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        if predicate():
            return True
        pause.wait(0.01)
    return predicate()
