"""The one place that turns runtime choices into onnxruntime session options and providers.

Nothing else in the code base creates ``SessionOptions`` or picks execution providers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RuntimeOptions", "create_session"]


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """What the hardware profile (or an explicit setting) decided for onnxruntime."""

    intra_op_threads: int = 1
    inter_op_threads: int = 1


def create_session(model_path: Path, runtime: RuntimeOptions) -> tuple[Any, str]:
    """Load ``model_path`` into an ``InferenceSession``; returns it and the provider in use."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = runtime.intra_op_threads
    options.inter_op_num_threads = runtime.inter_op_threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(model_path), sess_options=options,
                                   providers=["CPUExecutionProvider"])
    return session, session.get_providers()[0]
