"""The one place that turns runtime choices into onnxruntime session options and providers.

Nothing else creates ``SessionOptions`` or picks execution providers: the hardware profile
decides, its :class:`~agent.hardware.runtime.RuntimeOptions` carry the decision here, and
:func:`create_session` applies it (threads, affinity, spinning, providers, CPU last; a fallback is
never silent). :func:`pin_current_thread` pins the calling thread. The options:
docs/internals.md#onnxruntime-sessions.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from agent.hardware.runtime import GraphOptimization, Provider, RuntimeOptions
from agent.logs import get_logger

__all__ = [
    "ORT_PROVIDER_NAMES",
    "CacheOutcome",
    "ProviderError",
    "build_session_options",
    "create_session",
    "pin_current_thread",
    "plan_providers",
]

log = get_logger(__name__)

ORT_PROVIDER_NAMES: dict[Provider, str] = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
_OPT_LEVELS: dict[GraphOptimization, str] = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


CacheOutcome = Literal["hit", "stored", "unsaved", "off"]
"""What the optimised-model cache did for a session: ``hit`` (read from it, nothing built),
``stored`` (built and saved for the next start), ``unsaved`` (built, the save failed), ``off``
(no cache for this session: no cache directory, no sha256, graph optimisation off or a GPU
provider)."""


class ProviderError(RuntimeError):
    """A required execution provider is not available or onnxruntime fell back from it."""


def build_session_options(runtime: RuntimeOptions) -> Any:
    """The ``onnxruntime.SessionOptions`` for ``runtime`` (nothing else builds one)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = runtime.intra_op_threads
    options.inter_op_num_threads = runtime.inter_op_threads
    options.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if runtime.execution_mode == "parallel"
                              else ort.ExecutionMode.ORT_SEQUENTIAL)
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                               _OPT_LEVELS[runtime.graph_optimization])
    options.enable_cpu_mem_arena = runtime.enable_cpu_mem_arena
    options.enable_mem_pattern = runtime.enable_mem_pattern
    if runtime.optimized_model_path is not None:
        options.optimized_model_filepath = str(runtime.optimized_model_path)
        # onnxruntime warns that the saved graph may be CPU-specific; the cache key covers the
        # CPU's instruction-set flags, so the warning is noise here.
        options.log_severity_level = 3
    spinning = "1" if runtime.allow_spinning else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    options.add_session_config_entry("session.inter_op.allow_spinning", spinning)
    affinity = runtime.affinity_string()
    if affinity is not None:
        options.add_session_config_entry("session.intra_op_thread_affinities", affinity)
    for key, value in runtime.config_entries:
        options.add_session_config_entry(key, value)
    return options


def plan_providers(
    runtime: RuntimeOptions, available: Sequence[str]
) -> tuple[list[str | tuple[str, dict[str, str]]], list[str]]:
    """The explicit provider list for onnxruntime, and notes about providers skipped.

    ``available`` is ``onnxruntime.get_available_providers()``. CPU always closes the list (it
    runs the nodes a GPU provider does not take). Raises :class:`ProviderError` when
    ``require_provider`` is set and the first provider is missing from this build.
    """
    plan: list[str | tuple[str, dict[str, str]]] = []
    notes: list[str] = []
    for provider in runtime.providers:
        name = ORT_PROVIDER_NAMES[provider]
        if name not in available:
            note = f"{name} requested but this onnxruntime build lacks it (has {list(available)})"
            if runtime.require_provider and provider == runtime.providers[0]:
                raise ProviderError(note)
            notes.append(note)
            continue
        if provider == "tensorrt" and runtime.gpu_cache_dir is not None:
            plan.append((name, {"trt_engine_cache_enable": "True",
                                "trt_engine_cache_path": str(runtime.gpu_cache_dir)}))
        elif name not in plan:
            plan.append(name)
    if ORT_PROVIDER_NAMES["cpu"] not in plan:
        plan.append(ORT_PROVIDER_NAMES["cpu"])
    return plan, notes


def create_session(model_path: Path, runtime: RuntimeOptions,
                   model_sha256: str | None = None, *, part: str = "",
                   graph: Callable[[], bytes] | None = None,
                   before_reading: Callable[[], object] | None = None,
                   on_cache: Callable[[CacheOutcome], object] | None = None
                   ) -> tuple[Any, str]:
    """Load ``model_path`` into an ``InferenceSession``; returns it and the provider in use
    (onnxruntime's name, e.g. ``CPUExecutionProvider``).

    ``part`` and ``graph`` load a piece of that model instead (see :mod:`agent.voice.split`):
    ``graph`` returns the piece's serialized ONNX and is only called when the optimised-model
    cache does not already hold that ``part`` of the model. ``before_reading`` is called just
    before ``model_path`` is read (a cache miss without ``graph``); it may raise to refuse.

    A provider that was wanted but is not used is logged as a warning (``onnx_provider_fallback``)
    and raises :class:`ProviderError` when ``runtime.require_provider`` is set.
    Runs on the calling thread (the loader); the session itself is thread-safe for ``run``.

    With ``runtime.optimized_cache_dir`` and the model's ``model_sha256``, CPU sessions use the
    optimised-model cache: the first load saves onnxruntime's optimised graph there, later loads
    read it with graph optimisation off, which makes session creation several times faster. The
    cache key covers the model's sha256, the onnxruntime version, the optimisation level and the
    CPU's instruction-set flags (the saved graph may use CPU-specific layouts). A cached file that
    fails to load is deleted and the original model is loaded instead. ``on_cache`` is told
    what the cache did (:data:`CacheOutcome`).
    """
    import onnxruntime as ort

    plan, notes = plan_providers(runtime, ort.get_available_providers())
    for note in notes:
        log.warning("onnx_provider_unavailable", detail=note)
    cached = _optimized_cache_path(runtime, model_sha256, plan, ort.__version__, part)
    session = _load_cached(cached, runtime, plan) if cached is not None else None
    outcome: CacheOutcome = "off" if cached is None else "hit"
    if session is None:
        save_to = data_name = None
        if cached is not None:
            token = f"{os.getpid()}-{secrets.token_hex(4)}"
            save_to = cached.with_name(f".{cached.stem}.{token}.tmp.onnx")
            data_name = f"{cached.stem}-{token}.data"
            runtime = replace(runtime, optimized_model_path=save_to, config_entries=(
                *runtime.config_entries,
                ("session.optimized_model_external_initializers_file_name", data_name),
                ("session.optimized_model_external_initializers_min_size_in_bytes",
                 str(_EXTERNAL_MIN_BYTES))))
        if graph is None and before_reading is not None:
            before_reading()
        source = graph() if graph is not None else str(model_path)
        session = ort.InferenceSession(source, sess_options=build_session_options(runtime),
                                       providers=plan)
        if cached is not None and save_to is not None and data_name is not None:
            outcome = "stored" if _publish_cached(save_to, cached, data_name) else "unsaved"
    if on_cache is not None:
        on_cache(outcome)
    used = _provider_in_use(session, runtime, model_path)
    log.info("onnx_session_created", model=str(model_path), part=part or "whole",
             provider=used, **runtime.describe())
    return session, used


def _provider_in_use(session: Any, runtime: RuntimeOptions, model_path: Path) -> str:
    """The provider ``session`` runs on; a fallback from the one wanted is logged, or raises
    :class:`ProviderError` when ``runtime.require_provider`` is set."""
    used = session.get_providers()
    first_wanted = ORT_PROVIDER_NAMES[runtime.providers[0]]
    if used[0] != first_wanted:
        detail = f"asked for {first_wanted}, onnxruntime uses {used[0]}"
        if runtime.require_provider:
            raise ProviderError(f"{model_path}: {detail}")
        log.warning("onnx_provider_fallback", model=str(model_path), detail=detail)
    return str(used[0])


_CACHE_KEEP = 8
"""Optimised models kept in the cache (the newest); older ones are deleted."""
_EXTERNAL_MIN_BYTES = 1024
"""Cached graphs keep their weights (initializers of at least this size) in a data file next to
them: onnxruntime then parses a small graph and reads the weights straight from that file, which
builds the session faster and with less memory (``bench/streaming_memory.py`` measures both).
Each write gets a data file of its own (``<key>-<token>.data``, named inside the
graph), so a file another process is reading is never rewritten; a newer entry's publication
deletes the older ones."""


def _cpu_flags_digest() -> str:
    """A short digest of the CPU's instruction-set flags (x86 ``flags``, ARM ``Features``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            lines = {line.split(":", 1)[1].strip() for line in handle
                     if line.split(":", 1)[0].strip() in ("flags", "Features") and ":" in line}
    except OSError:
        lines = set()
    material = "|".join(sorted(lines)) + "|" + platform.machine()
    return hashlib.sha256(material.encode()).hexdigest()[:12]


def _optimized_cache_path(runtime: RuntimeOptions, model_sha256: str | None,
                          plan: Sequence[Any], ort_version: str, part: str = "") -> Path | None:
    if (runtime.optimized_cache_dir is None or not model_sha256
            or runtime.graph_optimization == "disable" or runtime.optimized_model_path is not None
            or plan != [ORT_PROVIDER_NAMES["cpu"]]):
        return None  # GPU providers compile their own graphs; nothing to cache here
    material = f"{model_sha256}|{ort_version}|{runtime.graph_optimization}|{_cpu_flags_digest()}"
    if part:
        material += f"|{part}"
    key = hashlib.sha256(material.encode()).hexdigest()[:24]
    try:
        runtime.optimized_cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("onnx_optimized_cache_unavailable", dir=str(runtime.optimized_cache_dir),
                    error=str(exc))
        return None
    return runtime.optimized_cache_dir / f"{key}.onnx"


def _load_cached(cached: Path, runtime: RuntimeOptions, plan: list[Any]) -> Any:
    """A session from the cached optimised graph, or None (missing or unusable: deleted)."""
    import onnxruntime as ort

    if not cached.is_file():
        return None
    options = build_session_options(replace(runtime, graph_optimization="disable"))
    try:
        session = ort.InferenceSession(str(cached), sess_options=options, providers=plan)
    except Exception as exc:  # a truncated or foreign file, or its weights gone: rebuild it
        log.warning("onnx_optimized_cache_bad", file=str(cached), error=str(exc))
        _remove_entry(cached)
        return None
    with contextlib.suppress(OSError):
        os.utime(cached)  # most recently used
    log.info("onnx_optimized_cache_hit", file=cached.name)
    return session


def _publish_cached(saved: Path, cached: Path, data_name: str) -> bool:
    """Move onnxruntime's freshly saved graph into place and keep the cache small. The graph's
    weights are already in ``data_name`` (named inside the graph); data files of the entry this
    one replaces are deleted (a process still reading one keeps it until it closes it)."""
    try:
        os.replace(saved, cached)
    except OSError as exc:
        log.warning("onnx_optimized_cache_write_failed", file=str(cached), error=str(exc))
        saved.unlink(missing_ok=True)
        (cached.parent / data_name).unlink(missing_ok=True)
        return False
    for stale in cached.parent.glob(f"{cached.stem}-*.data"):
        if stale.name != data_name:
            stale.unlink(missing_ok=True)
    log.info("onnx_optimized_cache_stored", file=cached.name)
    entries = sorted(cached.parent.glob("*.onnx"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[_CACHE_KEEP:]:
        _remove_entry(old)
    return True


def _remove_entry(cached: Path) -> None:
    """Delete a cached graph and its weights."""
    cached.unlink(missing_ok=True)
    for data in cached.parent.glob(f"{cached.stem}-*.data"):
        data.unlink(missing_ok=True)


def pin_current_thread(runtime: RuntimeOptions) -> bool:
    """Pin the calling thread to ``runtime.affinity_cpus`` (Linux); True when pinned.

    onnxruntime pins only its own worker threads; the thread that calls ``session.run`` does the
    remaining share of every operator, so the synthesis worker calls this once at its start.
    """
    if not runtime.affinity_cpus or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, runtime.affinity_cpus)  # 0 = the calling thread on Linux
    except OSError as exc:
        log.warning("thread_affinity_failed", cpus=list(runtime.affinity_cpus), error=str(exc))
        return False
    return True
