"""A test voice whose model never finishes for slow speech: a real way to hang synthesis.

The bundle ``stall-test`` is the tiny voice of :mod:`make_tiny_voice` with one addition to
its ONNX graph: a ``Loop`` node whose trip count is ``(length_scale - 2) * 1e15`` when the
length scale is above 2, and 0 otherwise. The voice's own length scale is 1.0, so it loads,
warms up and speaks normally; a ``speak`` with ``"speed": 0.25`` (length scale 4.0) makes
onnxruntime spin in that loop for what is, in practice, forever. The synthesis thread is
then genuinely stuck inside ``InferenceSession.run``, exactly like a wedged model, with no
mock and no hook in the agent.

It costs one CPU core while it spins; tests end the agent process soon after.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support import make_tiny_voice

VOICE = "stall-test"
HANG_SPEED = 0.25
"""A ``speak`` ``speed`` at which the model never returns (length scale 4.0)."""


def _add_stall_loop(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    # Rename the tiny graph's output so the stall can be folded into the final "output".
    for node in graph.node:
        for index, name in enumerate(node.output):
            if name == "output":
                node.output[index] = "plain_output"
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["count_in", "body_one"], ["count_out"]),
        ],
        "stall_body",
        inputs=[
            helper.make_tensor_value_info("iteration", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("count_in", TensorProto.FLOAT, [1]),
        ],
        outputs=[
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("count_out", TensorProto.FLOAT, [1]),
        ],
        initializer=[numpy_helper.from_array(np.array([1.0], dtype=np.float32), "body_one")],
    )
    graph.node.extend([
        # trips = int64(relu(length_scale - 2) * 1e15), a scalar
        helper.make_node("Sub", ["length", "stall_two"], ["over"]),
        helper.make_node("Relu", ["over"], ["over_pos"]),
        helper.make_node("Mul", ["over_pos", "stall_big"], ["trips_f"]),
        helper.make_node("Cast", ["trips_f"], ["trips_1"], to=TensorProto.INT64),
        helper.make_node("Squeeze", ["trips_1"], ["trips"]),
        helper.make_node("Loop", ["trips", "stall_true", "stall_zero"], ["stall_count"],
                         body=body),
        helper.make_node("Mul", ["stall_count", "zero"], ["stall_nothing"]),
        helper.make_node("Add", ["plain_output", "stall_nothing"], ["output"]),
    ])
    graph.initializer.extend([
        numpy_helper.from_array(np.array([2.0], dtype=np.float32), "stall_two"),
        numpy_helper.from_array(np.array([1e15], dtype=np.float32), "stall_big"),
        numpy_helper.from_array(np.array(True), "stall_true"),
        numpy_helper.from_array(np.array([0.0], dtype=np.float32), "stall_zero"),
    ])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build_bundle(models_dir: Path, *, version: str = "1.0.0") -> Path:
    """Write ``models_dir/stall-test/`` (model, config, manifest); returns the bundle dir."""
    from agent.voice.bundle import write_manifest

    bundle = models_dir / VOICE
    bundle.mkdir(parents=True, exist_ok=True)
    model = bundle / f"{VOICE}.onnx"
    make_tiny_voice.build_model(model)
    _add_stall_loop(model)
    make_tiny_voice.build_config(bundle / f"{VOICE}.onnx.json")
    write_manifest(bundle, voice=VOICE, version=version,
                   sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                   source="tests/stall_voice.py")
    return bundle
