"""The onnxruntime choices, as one frozen value: :class:`RuntimeOptions`.

The hardware profile decides them (:func:`agent.hardware.effective.resolve_profile` puts them in
``EffectiveProfile.runtime.options``), the voice library adds where its caches live, and
:mod:`agent.voice.onnx_session`, the one module that talks to onnxruntime about options, turns
them into ``SessionOptions`` and a provider list. They live here, in the hardware package, so
that the profile owns its result without importing the voice (or onnxruntime).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = [
    "PROVIDERS",
    "ExecutionMode",
    "GraphOptimization",
    "ModelVariant",
    "Provider",
    "RuntimeOptions",
    "ThreadAffinity",
]

Provider = Literal["tensorrt", "cuda", "cpu"]
"""An execution provider, by our name (onnxruntime's names are in
:data:`agent.voice.onnx_session.ORT_PROVIDER_NAMES`)."""
PROVIDERS: tuple[Provider, ...] = get_args(Provider)
ExecutionMode = Literal["sequential", "parallel"]
GraphOptimization = Literal["disable", "basic", "extended", "all"]
ThreadAffinity = Literal["none", "big_cores"]
"""The pinning rule: ``big_cores`` pins the intra-op threads to the big cores where there are."""
ModelVariant = Literal["fp32", "int8"]


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """What the hardware profile (or an explicit setting) decided for onnxruntime, plus where
    the caches live.

    The defaults (1 thread, CPU) are safe anywhere; real deployments take
    ``EffectiveProfile.runtime.options`` (``dataclasses.replace`` changes a field).
    """

    intra_op_threads: int = 1
    inter_op_threads: int = 1
    execution_mode: ExecutionMode = "sequential"
    graph_optimization: GraphOptimization = "all"
    affinity_cpus: tuple[int, ...] = ()
    """0-based CPU ids the intra-op worker threads are pinned to; empty = not pinned."""
    allow_spinning: bool = True
    providers: tuple[Provider, ...] = ("cpu",)
    """Preference order; unavailable GPU providers are skipped (with a warning)."""
    require_provider: bool = False
    """Fail instead of falling back when the first provider cannot be used."""
    optimized_model_path: Path | None = None
    """Where onnxruntime saves the optimised graph (``optimized_model_filepath``)."""
    optimized_cache_dir: Path | None = None
    """Directory of the optimised-model cache (see
    :func:`agent.voice.onnx_session.create_session`); None = off."""
    enable_cpu_mem_arena: bool = True
    enable_mem_pattern: bool = True
    decode_workers: int = 1
    """Decoder windows of one sentence run at once, each its own ``session.run`` on its own
    thread (1 = one after the other); the audio is the same either way."""
    gpu_cache_dir: Path | None = None
    """TensorRT engine cache directory (TensorRT only)."""
    config_entries: tuple[tuple[str, str], ...] = field(default=())
    """Further ``session.*`` config entries, applied last (for experiments and benchmarks)."""

    def __post_init__(self) -> None:
        if not 1 <= self.intra_op_threads <= 256:
            raise ValueError(f"intra_op_threads {self.intra_op_threads} not in 1..256")
        if not 1 <= self.inter_op_threads <= 64:
            raise ValueError(f"inter_op_threads {self.inter_op_threads} not in 1..64")
        if not 1 <= self.decode_workers <= 16:
            raise ValueError(f"decode_workers {self.decode_workers} not in 1..16")
        if any(c < 0 or c >= 4096 for c in self.affinity_cpus):
            raise ValueError(f"affinity CPUs {self.affinity_cpus} out of range")
        unknown = [p for p in self.providers if p not in PROVIDERS]
        if not self.providers or unknown:
            raise ValueError(f"providers {list(self.providers)} must be from "
                             f"{sorted(PROVIDERS)}")

    def affinity_string(self) -> str | None:
        """The ``session.intra_op_thread_affinities`` value, or None when not pinned.

        One entry per worker thread (``intra_op_threads - 1``; the calling thread is the other
        one), each the whole pinned set in onnxruntime's 1-based numbering, e.g.
        ``"5,6,7,8;5,6,7,8;5,6,7,8"`` for 4 threads on CPUs 4-7: the scheduler may move a worker
        between big cores but never onto a little one.
        """
        if not self.affinity_cpus or self.intra_op_threads < 2:
            return None
        cpus = ",".join(str(c + 1) for c in sorted(set(self.affinity_cpus)))
        return ";".join([cpus] * (self.intra_op_threads - 1))

    def describe(self) -> dict[str, Any]:
        """JSON-able summary for logs and health."""
        return {
            "intra_op_threads": self.intra_op_threads,
            "inter_op_threads": self.inter_op_threads,
            "execution_mode": self.execution_mode,
            "graph_optimization": self.graph_optimization,
            "affinity_cpus": list(self.affinity_cpus),
            "allow_spinning": self.allow_spinning,
            "decode_workers": self.decode_workers,
            "providers": list(self.providers),
        }
