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
import json
import os
import platform
import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from agent import jsonbound
from agent.fsutil import atomic_write
from agent.hardware.runtime import GraphOptimization, Provider, RuntimeOptions
from agent.logs import get_logger
from agent.voice.files import hash_exact, read_exact

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
                   on_cache: Callable[[CacheOutcome], object] | None = None
                   ) -> tuple[Any, str]:
    """Load the model at ``model_path`` into an ``InferenceSession``; returns it and the
    provider in use (onnxruntime's name, e.g. ``CPUExecutionProvider``).

    ``graph`` returns the serialized ONNX to load instead of the file: a voice's model bytes,
    read once and matched to ``model_sha256`` (:func:`agent.voice.bundle.read_model`), or with
    ``part`` a piece of that model (see :mod:`agent.voice.split`). It is only called when the
    optimised-model cache does not already hold that ``part`` of the model; it may raise to
    refuse. onnxruntime then never opens ``model_path``.

    A provider that was wanted but is not used is logged as a warning (``onnx_provider_fallback``)
    and raises :class:`ProviderError` when ``runtime.require_provider`` is set.
    Runs on the calling thread (the loader); the session itself is thread-safe for ``run``.

    With ``runtime.optimized_cache_dir`` and the model's ``model_sha256``, CPU sessions use the
    optimised-model cache: the first load saves onnxruntime's optimised graph there, later loads
    read it with graph optimisation off, which makes session creation several times faster. The
    cache key covers the model's sha256, the onnxruntime version, the optimisation level and the
    CPU's instruction-set flags (the saved graph may use CPU-specific layouts). Each entry has a
    record of its files' sha256, written when it was built (from ``graph``'s verified bytes); an
    entry is read into memory, checked against its record and loaded from those bytes, and one
    without a record, that does not match it or that fails to load is deleted and rebuilt.
    ``on_cache`` is told what the cache did (:data:`CacheOutcome`).
    """
    import onnxruntime as ort

    plan, notes = plan_providers(runtime, ort.get_available_providers())
    for note in notes:
        log.warning("onnx_provider_unavailable", detail=note)
    cached = _optimized_cache_path(runtime, model_sha256, plan, ort.__version__, part)
    session = (_load_cached(cached, runtime, plan, model_sha256 or "")
               if cached is not None else None)
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
        source = graph() if graph is not None else str(model_path)
        session = ort.InferenceSession(source, sess_options=build_session_options(runtime),
                                       providers=plan)
        if cached is not None and save_to is not None and data_name is not None:
            stored = _publish_cached(save_to, cached, data_name, model_sha256 or "")
            outcome = "stored" if stored else "unsaved"
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
_RECORD_MAX_BYTES = 4096
"""Largest entry record (``<key>.sha256``: the sha256 and size of its graph and data file)."""
_ENTRY_MAX_BYTES = 4 << 30
"""Largest cached file read back (a record names its size)."""
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


def _load_cached(cached: Path, runtime: RuntimeOptions, plan: list[Any], model_sha256: str) -> Any:
    """A session from the cached optimised graph, loaded from the bytes that matched its
    record, or None (missing, unrecorded, changed or unusable: deleted, to be rebuilt)."""
    import onnxruntime as ort

    if not cached.is_file():
        return None
    try:
        graph = _read_entry(cached, model_sha256)
    except (OSError, ValueError) as exc:
        log.warning("onnx_optimized_cache_bad", file=str(cached), error=str(exc))
        _remove_entry(cached)
        return None
    options = build_session_options(replace(runtime, graph_optimization="disable"))
    # The graph loads from the bytes just checked; its weights from the data file beside it.
    options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                     str(cached.parent))
    try:
        session = ort.InferenceSession(graph, sess_options=options, providers=plan)
    except Exception as exc:  # a foreign file, or one from another onnxruntime: rebuild it
        log.warning("onnx_optimized_cache_bad", file=str(cached), error=str(exc))
        _remove_entry(cached)
        return None
    with contextlib.suppress(OSError):
        os.utime(cached)  # most recently used
    log.info("onnx_optimized_cache_hit", file=cached.name)
    return session


def _read_entry(cached: Path, model_sha256: str) -> bytes:
    """The entry's graph, read once and matched to the entry's record, once its data file
    matched it too; raises ``ValueError`` (no record, another model's, a file that changed)
    or ``OSError``."""
    record = _record_path(cached)
    if not record.is_file():
        raise ValueError("no record of its sha256 (made before entries had one): rebuilt")
    try:
        facts = jsonbound.loads(read_exact(record, record.stat().st_size)[0],
                                max_bytes=_RECORD_MAX_BYTES)
        if not isinstance(facts, dict) or facts.get("model_sha256") != model_sha256:
            raise ValueError(f"{record.name} is not this model's record")
        data = facts["data"]
        if data is not None:
            name = str(data["name"])
            if Path(name).name != name or not name.startswith(f"{cached.stem}-"):
                raise ValueError(f"{record.name} names a foreign data file {name!r}")
            _check_recorded(cached.parent / name, data, keep=False)
        return _check_recorded(cached, facts["graph"], keep=True)
    except (KeyError, TypeError, jsonbound.JsonError) as exc:
        raise ValueError(f"{record.name} unusable: {exc}") from None


def _check_recorded(path: Path, entry: Any, *, keep: bool) -> bytes:
    """``path``'s bytes (``keep``; else only hashed) once they match the record's ``entry``."""
    size, want = int(entry["size"]), str(entry["sha256"])
    if not 0 <= size <= _ENTRY_MAX_BYTES:
        raise ValueError(f"{path.name}: recorded size {size} out of bounds")
    data, digest = read_exact(path, size) if keep else (b"", hash_exact(path, size))
    if digest != want:
        raise ValueError(f"{path.name}: sha256 differs from the record made when it was built")
    return data


def _record_path(cached: Path) -> Path:
    return cached.with_suffix(".sha256")


def _write_record(cached: Path, data_name: str, model_sha256: str) -> None:
    """Record the sha256 of the entry's files as onnxruntime just wrote them (from verified
    bytes): a later load uses the entry only while they match."""
    def entry(path: Path) -> dict[str, Any]:
        return {"size": path.stat().st_size, "sha256": hash_exact(path, path.stat().st_size)}

    data = cached.parent / data_name
    facts = {"format": 1, "model_sha256": model_sha256, "graph": entry(cached),
             "data": {"name": data_name, **entry(data)} if data.is_file() else None}
    atomic_write(_record_path(cached), json.dumps(facts).encode(), prefix=".record-")


def _publish_cached(saved: Path, cached: Path, data_name: str, model_sha256: str) -> bool:
    """Move onnxruntime's freshly saved graph into place, record its files' sha256 and keep the
    cache small. The graph's weights are already in ``data_name`` (named inside the graph);
    data files of the entry this one replaces are deleted (a process still reading one keeps
    it until it closes it)."""
    try:
        _record_path(cached).unlink(missing_ok=True)  # no record: not used until written
        os.replace(saved, cached)
        _write_record(cached, data_name, model_sha256)
    except OSError as exc:
        log.warning("onnx_optimized_cache_write_failed", file=str(cached), error=str(exc))
        saved.unlink(missing_ok=True)
        _remove_entry(cached)
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
    """Delete a cached graph, its record and its weights."""
    _record_path(cached).unlink(missing_ok=True)
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
