"""The profile really reaches onnxruntime: threads, affinity, spinning and providers."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from agent.hardware.effective import resolve_profile
from agent.hardware.runtime import RuntimeOptions
from agent.library.options import voice_options
from agent.library.voices import VoiceLibrary
from agent.voice.onnx_session import (
    ProviderError,
    build_session_options,
    create_session,
    plan_providers,
)
from tests.support.hardware_support import (
    PROFILES,
    new_threads,
    settings,
    sysroot,
    thread_cpus,
    wait_for,
    write_matmul_model,
)


@pytest.fixture()
def model(tmp_path: Path) -> tuple[Path, np.ndarray]:
    path = tmp_path / "matmul.onnx"
    return path, write_matmul_model(path)


def _check_output(session: ort.InferenceSession, weights: np.ndarray) -> None:
    x = np.arange(3 * weights.shape[0], dtype=np.float32).reshape(3, -1) / 100
    (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, x @ weights, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("board", "threads"), [("rpi4", 4), ("container-2cpu", 2),
                                                ("container-v1-cpuset", 1)])
def test_session_is_built_with_the_profiles_thread_counts(
    board: str, threads: int, model: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, weights = model
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot(board))
    assert eff.runtime.options.intra_op_threads == threads
    runtime = eff.runtime.options
    (session, provider), started = new_threads(lambda: create_session(path, runtime))
    options = session.get_session_options()
    assert options.intra_op_num_threads == threads
    assert options.inter_op_num_threads == 1
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # onnxruntime starts one pool thread per intra-op thread except the caller's own
    assert len(started) == threads - 1
    assert provider == "CPUExecutionProvider"
    _check_output(session, weights)


def test_parallel_mode_starts_an_inter_op_pool(model: tuple[Path, np.ndarray]) -> None:
    path, weights = model
    runtime = RuntimeOptions(intra_op_threads=3, inter_op_threads=2, execution_mode="parallel")
    (session, _), started = new_threads(lambda: create_session(path, runtime))
    assert session.get_session_options().execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert len(started) == (3 - 1) + (2 - 1)
    _check_output(session, weights)


def test_worker_threads_are_pinned_to_the_chosen_cpus(model: tuple[Path, np.ndarray]) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs to see pinning")
    target = allowed[-1]
    path, weights = model
    runtime = RuntimeOptions(intra_op_threads=3, affinity_cpus=(target,))
    (session, _), started = new_threads(lambda: create_session(path, runtime))
    assert len(started) == 2
    # each worker pins itself when it starts running
    assert wait_for(lambda: all(thread_cpus(t) == str(target) for t in started)), \
        [thread_cpus(t) for t in started]
    _check_output(session, weights)


def test_rk3588_profile_pins_to_the_big_cores() -> None:
    eff = resolve_profile(settings(Path("/nonexistent-cache")), sysroot=sysroot("rk3588"))
    runtime = eff.runtime.options
    assert runtime.affinity_cpus == (4, 5, 6, 7)
    assert runtime.affinity_string() == "5,6,7,8;5,6,7,8;5,6,7,8"  # 1-based, threads - 1
    options = build_session_options(runtime)
    assert options.get_session_config_entry("session.intra_op_thread_affinities") == \
        "5,6,7,8;5,6,7,8;5,6,7,8"


def test_spinning_policy_reaches_the_session(model: tuple[Path, np.ndarray],
                                             tmp_path: Path) -> None:
    path, _ = model
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rpi-zero2w"))
    assert eff.runtime.options.allow_spinning is False
    session, _ = create_session(path, eff.runtime.options)
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 3


def test_extra_runtime_fields_pass_through(model: tuple[Path, np.ndarray],
                                          tmp_path: Path) -> None:
    path, _ = model
    eff = resolve_profile(settings(tmp_path), sysroot=sysroot("rpi4"))
    optimized = tmp_path / "optimized.onnx"
    runtime = replace(eff.runtime.options, optimized_model_path=optimized,
                      graph_optimization="basic")
    session, _ = create_session(path, runtime)
    assert optimized.is_file()
    assert session.get_session_options().graph_optimization_level == \
        ort.GraphOptimizationLevel.ORT_ENABLE_BASIC


def test_provider_plan_is_explicit_and_ends_with_cpu() -> None:
    gpu_build = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    plan, notes = plan_providers(RuntimeOptions(providers=("cuda", "cpu")), gpu_build)
    assert plan == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert notes == []
    plan, notes = plan_providers(RuntimeOptions(providers=("cuda",)), ["CPUExecutionProvider"])
    assert plan == ["CPUExecutionProvider"]
    assert "CUDAExecutionProvider requested but this onnxruntime build lacks it" in notes[0]
    plan, _ = plan_providers(
        RuntimeOptions(providers=("tensorrt", "cuda", "cpu"), gpu_cache_dir=Path("/c")), gpu_build)
    assert plan[0] == ("TensorrtExecutionProvider",
                       {"trt_engine_cache_enable": "True", "trt_engine_cache_path": "/c"})


def test_a_required_missing_provider_is_an_error(model: tuple[Path, np.ndarray]) -> None:
    path, _ = model
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime build has CUDA")
    with pytest.raises(ProviderError, match="CUDAExecutionProvider requested"):
        create_session(path, RuntimeOptions(providers=("cuda", "cpu"), require_provider=True))


def test_a_fallback_is_reported_not_silent(model: tuple[Path, np.ndarray],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from agent.logs import configure_logging

    path, weights = model
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime build has CUDA")
    configure_logging("info", "json")
    session, provider = create_session(path, RuntimeOptions(providers=("cuda", "cpu")))
    out = capsys.readouterr().err  # logs go to stderr
    assert provider == "CPUExecutionProvider"
    assert '"event": "onnx_provider_unavailable"' in out
    assert '"event": "onnx_provider_fallback"' in out
    assert "asked for CUDAExecutionProvider, onnxruntime uses CPUExecutionProvider" in out
    _check_output(session, weights)


def test_runtime_options_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="intra_op_threads"):
        RuntimeOptions(intra_op_threads=0)
    with pytest.raises(ValueError, match="providers"):
        RuntimeOptions(providers=("npu",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="affinity"):
        RuntimeOptions(affinity_cpus=(-1,))


def test_pin_current_thread_pins_only_the_caller() -> None:
    import threading

    from agent.voice.onnx_session import pin_current_thread

    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs to see pinning")
    seen: dict[str, object] = {}

    def worker() -> None:
        seen["pinned"] = pin_current_thread(RuntimeOptions(intra_op_threads=2,
                                                           affinity_cpus=(allowed[0],)))
        seen["cpus"] = thread_cpus(str(threading.get_native_id()))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert seen == {"pinned": True, "cpus": str(allowed[0])}
    assert sorted(os.sched_getaffinity(0)) == allowed  # the test's own thread is untouched
    assert pin_current_thread(RuntimeOptions()) is False  # nothing to pin to


def test_voice_options_carry_the_profile_and_the_settings(tmp_path: Path) -> None:
    config = settings(tmp_path, synthesis={"max_text_chars": 77, "sentence_silence_s": 0.5,
                                           "stream_first_frames": 0, "stream_growth": 3})
    eff = resolve_profile(config, sysroot=sysroot("rk3588"))
    options = voice_options(config, eff)
    cache = tmp_path / "cache" / "ort"
    assert options.runtime == replace(eff.runtime.options, optimized_cache_dir=cache)
    assert options.variant == eff.runtime.model_variant == "int8"
    assert (options.max_chars, options.sentence_silence_s) == (77, 0.5)
    assert (options.stream_first_frames, options.stream_growth) == (0, 3)
    plain = voice_options(config)  # no profile: one thread on the CPU, fp32
    assert plain.runtime == RuntimeOptions(optimized_cache_dir=cache)
    assert plain.variant == "fp32"


def test_the_librarys_voices_run_with_the_profiles_session_options(
        tiny_voice_dir: Path, tmp_path: Path) -> None:
    config = settings(tmp_path, models={"dir": str(tiny_voice_dir.parent),
                                        "default_voice": tiny_voice_dir.name, "variant": "fp32"})
    eff = resolve_profile(config, sysroot=sysroot("rpi-zero2w"))
    voice = VoiceLibrary.for_settings(config, profile=eff).get()
    options = voice.session.get_session_options()
    assert options.intra_op_num_threads == eff.runtime.options.intra_op_threads == 3
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert list((tmp_path / "cache" / "ort").glob("*.onnx"))  # the optimised-model cache


def test_decode_workers_and_spinning_of_a_profile_reach_the_voice(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"  # the shipped x86_64 profile, set for a busy host
    profiles.mkdir()
    shipped = (PROFILES / "generic-x86_64.toml").read_text()
    assert "\ndecode_workers" not in shipped  # one window at a time where nothing is set
    (profiles / "generic-x86_64.toml").write_text(shipped.replace(
        "[runtime]\n", "[runtime]\nallow_spinning = false\ndecode_workers = 2\n"))
    checkout = settings(tmp_path, synthesis={"profiles_dir": str(profiles)})
    eff = resolve_profile(checkout, sysroot=sysroot("container-2cpu"))
    runtime = eff.runtime.options
    assert (eff.name, runtime.intra_op_threads, runtime.decode_workers) == ("generic-x86_64", 2, 2)
    assert eff.as_dict()["decode_workers"] == 2
    options = build_session_options(runtime)  # two runs at once on two cores: no busy-waiting
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    voice = voice_options(checkout, eff)
    assert voice.runtime.decode_workers == 2
    one = resolve_profile(checkout, sysroot=sysroot("container-v1-cpuset"))
    assert one.runtime.options.decode_workers == 1  # never more windows than threads
    with pytest.raises(ValueError, match=r"decode_workers 0 not in 1\.\.16"):
        replace(runtime, decode_workers=0)
