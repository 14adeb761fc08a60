"""Transposed-convolution upsamplers rewritten as polyphase convolutions (exact).

Output phase ``r`` of a transposed convolution with stride ``s`` and kernel ``K`` is an ordinary
convolution of the input with the taps ``r', r' + s, ...`` of the kernel. The ``s`` phases become
the output channels of one ``Conv``, and a ``Reshape``/``Transpose``/``Reshape`` interleaves them
again. The ``Conv`` can be quantized (onnxruntime has no int8 ``ConvTranspose`` on CPU) and
needs no col2im. Works on height-1 2-D blocks (see :mod:`agent.quantize.layout`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from agent.quantize.graph import attr_int, attr_ints, use_counts

__all__ = ["upsampler_shape", "upsamplers_as_convs"]


def upsampler_shape(node: Any, inits: dict[str, Any]) -> tuple[int, int] | None:
    """(stride, padding) of a height-1 2-D ``ConvTranspose`` whose output is exactly ``stride``
    times its input, or None when ``node`` is not one."""
    if node.op_type != "ConvTranspose" or node.domain not in ("", "ai.onnx"):
        return None
    weight = inits.get(node.input[1]) if len(node.input) > 1 else None
    if weight is None or len(weight.dims) != 4 or weight.dims[2] != 1:
        return None
    kernel = int(weight.dims[3])
    strides = attr_ints(node, "strides", [1, 1])
    pads = attr_ints(node, "pads", [0, 0, 0, 0])
    if (attr_int(node, "group", 1) != 1 or attr_ints(node, "dilations", [1, 1]) != [1, 1]
            or strides[0] != 1 or pads[0] != 0 or pads[2] != 0 or pads[1] != pads[3]
            or attr_ints(node, "output_padding", [0, 0]) != [0, 0]
            or any(a.name == "output_shape"
                   or (a.name == "auto_pad" and a.s not in (b"", b"NOTSET"))
                   for a in node.attribute)):
        return None
    stride, pad = strides[1], pads[1]
    if stride < 2 or kernel - 2 * pad != stride:
        return None
    return stride, pad


def upsamplers_as_convs(model: Any, pattern: str) -> int:
    """Rewrite the 2-D height-1 ``ConvTranspose`` nodes whose names match ``pattern`` (searched)
    in their polyphase form, in place; returns how many were rewritten.

    The phases become the output channels of one ``Conv`` (named ``<block>/PolyConv``), and
    ``[N, s, C, H*W] -> [N, C, H*W, s] -> [N, C, H, W*s]`` interleaves them. Only upsamplers
    whose output is exactly ``s`` times longer than their input (``K - 2 * pad == s``) are
    rewritten; the height may be any (see :func:`agent.quantize.time_rows.fold_time_into_rows`).
    """
    graph = model.graph
    matcher = re.compile(pattern)
    inits = {i.name: i for i in graph.initializer}
    uses = use_counts(graph)
    rewritten: list[Any] = []
    converted = 0
    for node in graph.node:
        shape = upsampler_shape(node, inits) if matcher.search(node.name) else None
        if shape is None or uses[node.input[1]] != 1:
            rewritten.append(node)
            continue
        rewritten += _polyphase(graph, node, inits, *shape)
        converted += 1
    if converted:
        used = {name for n in rewritten for name in n.input}
        kept = [i for i in graph.initializer if i.name in used]
        del graph.node[:]
        graph.node.extend(rewritten)
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return converted


def _polyphase_weight(weight: np.ndarray, stride: int, pad: int) -> tuple[np.ndarray, int, int]:
    """The ``Conv`` kernel ``[s * C_out, C_in, 1, taps]`` of a ``ConvTranspose`` kernel
    ``[C_in, C_out, 1, K]``, and the lowest and highest input offset its taps read."""
    c_in, c_out, _, kernel = weight.shape
    # Output sample m*s + r is sum_j x[m + q - j] * w[j*s + r'] with r + pad = q*s + r'.
    taps = [(r, (r + pad) // stride - j, j * stride + (r + pad) % stride)
            for r in range(stride) for j in range(kernel // stride + 1)
            if j * stride + (r + pad) % stride < kernel]
    low = min(offset for _, offset, _ in taps)
    high = max(offset for _, offset, _ in taps)
    poly = np.zeros((stride * c_out, c_in, 1, high - low + 1), dtype=weight.dtype)
    for r, offset, k in taps:
        poly[r * c_out:(r + 1) * c_out, :, 0, offset - low] = weight[:, :, 0, k].T
    return poly, low, high


def _polyphase(graph: Any, node: Any, inits: dict[str, Any], stride: int,
               pad: int) -> list[Any]:
    """The nodes replacing upsampler ``node`` (their initializers are added to ``graph``)."""
    from onnx import helper, numpy_helper

    weight = numpy_helper.to_array(inits[node.input[1]])  # [C_in, C_out, 1, K]
    c_out = weight.shape[1]
    poly, low, high = _polyphase_weight(weight, stride, pad)
    base = node.name.rsplit("/", 1)[0]
    out = node.output[0]
    names = {key: f"{out}_poly_{key}" for key in
             ("w", "b", "conv", "phases", "mixed", "shape1", "height", "head", "tail", "shape2")}
    graph.initializer.append(numpy_helper.from_array(poly, names["w"]))
    inputs = [node.input[0], names["w"]]
    if len(node.input) > 2 and node.input[2]:
        bias = numpy_helper.to_array(inits[node.input[2]])
        graph.initializer.append(numpy_helper.from_array(np.tile(bias, stride), names["b"]))
        inputs.append(names["b"])
    for key, value in (("shape1", [0, stride, c_out, -1]), ("head", [0, c_out]), ("tail", [-1])):
        graph.initializer.append(numpy_helper.from_array(np.array(value, np.int64), names[key]))
    return [
        helper.make_node("Conv", inputs, [names["conv"]], name=f"{base}/PolyConv",
                         kernel_shape=[1, high - low + 1], pads=[0, -low, 0, high],
                         strides=[1, 1], dilations=[1, 1]),
        helper.make_node("Reshape", [names["conv"], names["shape1"]], [names["phases"]],
                         name=f"{base}/PolyPhases"),
        helper.make_node("Transpose", [names["phases"]], [names["mixed"]],
                         name=f"{base}/PolyInterleave", perm=[0, 2, 3, 1]),
        helper.make_node("Shape", [node.input[0]], [names["height"]],
                         name=f"{base}/PolyHeight", start=2, end=3),
        helper.make_node("Concat", [names["head"], names["height"], names["tail"]],
                         [names["shape2"]], name=f"{base}/PolyShape", axis=0),
        helper.make_node("Reshape", [names["mixed"], names["shape2"]], [out],
                         name=f"{base}/PolyJoin"),
    ]
