"""A tiny generated voice with the structure and node names of a Piper (VITS) voice.

The lead's tiny voice (make_tiny_voice.py) has no convolutions, so there is nothing to
quantize in it. This one has Piper's signature and config (the same phoneme id map) and a
small convolutional graph named like Piper's export, so the recipe's node patterns, the 2-D
rewrite and QDQ quantization all act on it::

    input ids -> /enc_p/emb (Gather) -> /enc_p/proj (MatMul) -> [N, C, T]
      -> /flow/flows.0/pre (Conv) -> /dec/conv_pre (Conv) -> LeakyRelu
      -> /dec/ups.0 (ConvTranspose x HOP) -> /dec/resblocks.0 (LeakyRelu, Conv, Add)
      -> /dec/conv_post (Conv) -> /dec/Tanh -> output [1, 1, N * HOP]

Every phoneme lasts ``hop`` samples, so two models with different ``hop`` differ in duration.
Random weights (seeded): it sounds like nothing, but it is deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.support import make_tiny_voice

VOICE = "conv-test"
SAMPLE_RATE = 16000
CHANNELS = 16


def _weights(rng: np.random.Generator, hop: int) -> dict[str, np.ndarray]:
    """The seeded random weights, by initializer name."""

    def weight(*shape: int, gain: float = 1.0) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return np.asarray(rng.standard_normal(shape) * gain / np.sqrt(fan_in), dtype=np.float32)

    c = CHANNELS
    return {
        "emb": rng.standard_normal((make_tiny_voice.NUM_SYMBOLS, c)).astype(np.float32),
        "proj": weight(c, c).T.copy(),
        "flow.w": weight(c, c, 3), "flow.b": np.zeros(c, np.float32),
        "pre.w": weight(c, c, 5), "pre.b": np.zeros(c, np.float32),
        "ups.w": weight(c, c // 2, 2 * hop, gain=4.0), "ups.b": np.zeros(c // 2, np.float32),
        "rb.w": weight(c // 2, c // 2, 3), "rb.b": np.zeros(c // 2, np.float32),
        "post.w": weight(1, c // 2, 7, gain=0.5),
    }


def _nodes(hop: int) -> list[Any]:
    """The graph's nodes, named like Piper's export."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("Gather", ["emb", "input"], ["e"], name="/enc_p/emb/Gather"),
        helper.make_node("MatMul", ["e", "proj"], ["p"], name="/enc_p/proj/MatMul"),
        helper.make_node("Transpose", ["p"], ["x0"], name="/enc_p/Transpose", perm=[0, 2, 1]),
        helper.make_node("Conv", ["x0", "flow.w", "flow.b"], ["f"], name="/flow/flows.0/pre/Conv",
                         pads=[1, 1], kernel_shape=[3]),
        helper.make_node("Add", ["f", "x0"], ["z"], name="/flow/flows.0/Add"),
        helper.make_node("Conv", ["z", "pre.w", "pre.b"], ["d0"], name="/dec/conv_pre/Conv",
                         pads=[2, 2], kernel_shape=[5]),
        helper.make_node("LeakyRelu", ["d0"], ["d1"], name="/dec/LeakyRelu", alpha=0.1),
        helper.make_node("ConvTranspose", ["d1", "ups.w", "ups.b"], ["u"],
                         name="/dec/ups.0/ConvTranspose", strides=[hop], pads=[hop // 2, hop // 2],
                         kernel_shape=[2 * hop]),
        helper.make_node("LeakyRelu", ["u"], ["r0"], name="/dec/resblocks.0/LeakyRelu", alpha=0.1),
        helper.make_node("Conv", ["r0", "rb.w", "rb.b"], ["r1"],
                         name="/dec/resblocks.0/convs.0/Conv", pads=[2, 2], dilations=[2],
                         kernel_shape=[3]),
        helper.make_node("Add", ["r1", "u"], ["r2"], name="/dec/resblocks.0/Add"),
        helper.make_node("LeakyRelu", ["r2"], ["r3"], name="/dec/LeakyRelu_1", alpha=0.01),
        helper.make_node("Conv", ["r3", "post.w"], ["o0"], name="/dec/conv_post/Conv",
                         pads=[3, 3], kernel_shape=[7]),
        helper.make_node("Tanh", ["o0"], ["o1"], name="/dec/Tanh"),
        # Outside the decoder, like Piper's final Unsqueeze; uses every input.
        helper.make_node("Slice", ["scales", "one", "two"], ["length"], name="/Slice"),
        helper.make_node("Cast", ["input_lengths"], ["len_f"], name="/Cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["len_f", "zero"], ["len_zero"], name="/Mul"),
        helper.make_node("Add", ["o1", "len_zero"], ["o2"], name="/Add"),
        helper.make_node("Mul", ["o2", "length"], ["output"], name="/Mul_1"),
    ]


def build_model(path: Path, *, hop: int = 32, seed: int = 7) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = _weights(np.random.default_rng(seed), hop)
    nodes = _nodes(hop)
    initializers = [numpy_helper.from_array(v, k) for k, v in inits.items()] + [
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
        numpy_helper.from_array(np.array([0.0], np.float32), "zero"),
    ]
    graph = helper.make_graph(
        nodes, "conv_piper",
        inputs=[
            helper.make_tensor_value_info("input", TensorProto.INT64, [1, "N"]),
            helper.make_tensor_value_info("input_lengths", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
        ],
        outputs=[helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, "T"])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build_config(path: Path) -> None:
    make_tiny_voice.build_config(path)
    config = json.loads(path.read_text(encoding="utf-8"))
    config["audio"]["sample_rate"] = SAMPLE_RATE
    path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")


def build_bundle(models_dir: Path, *, hop: int = 32, version: str = "2.0.0",
                 source: str = "tests/quant_voice.py") -> Path:
    """``models_dir/conv-test/`` with the fp32 model, its config and a manifest."""
    from agent.voice.bundle import write_manifest

    bundle = models_dir / VOICE
    bundle.mkdir(parents=True, exist_ok=True)
    build_model(bundle / f"{VOICE}.onnx", hop=hop)
    build_config(bundle / f"{VOICE}.onnx.json")
    write_manifest(bundle, voice=VOICE, version=version, sample_rate=SAMPLE_RATE,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json", source=source)
    return bundle
