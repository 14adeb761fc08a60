"""Layout rewrites of ONNX voice graphs that keep the arithmetic and speed up onnxruntime.

:func:`convs_as_2d` writes the HiFi-GAN decoder's 1-D convolutions as 2-D ones of height 1, so
onnxruntime uses its blocked 2-D kernels and one channels-last layout through int8 chains; the
polyphase upsamplers (:mod:`agent.quantize.polyphase`) and the time rows
(:mod:`agent.quantize.time_rows`) are the two other exact rewrites on such a block. Shared graph
helpers are in :mod:`agent.quantize.graph`. Why and how:
docs/internals.md#layout-rewrites-of-the-decoder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from agent.quantize.graph import (
    CONV_OPS,
    ELEMENTWISE_OPS,
    drop_shapes_of,
    insert_sorted,
    scalar_constants_only,
    use_counts,
)

__all__ = ["convs_as_2d"]

_SPATIAL_ATTRS = ("kernel_shape", "dilations", "strides")


def convs_as_2d(model: Any, pattern: str) -> int:
    """Rewrite the 1-D convolution block of the nodes whose names match ``pattern`` (a regular
    expression, searched) as 2-D, in place.

    ``model`` is an ``onnx.ModelProto``. An ``Unsqueeze`` is added where a tensor enters the
    block and a ``Squeeze`` where one leaves it; kernels ``[O, I, k]`` become ``[O, I, 1, k]``.
    Only a block made of convolutions and element-wise ops whose constants are scalars is
    rewritten. Returns the number of convolutions converted; 0 means the block is absent or
    not rewritable, and the model is then untouched.
    """
    graph = model.graph
    matcher = re.compile(pattern)
    nodes = [n for n in graph.node if matcher.search(n.name)]
    block = {id(n) for n in nodes}
    inits = {i.name: i for i in graph.initializer}
    uses = use_counts(graph)
    if not nodes or not _rewritable(nodes, inits, uses):
        return 0
    inside = {o for n in nodes for o in n.output}
    entering = sorted({i for n in nodes for i in n.input
                       if i and i not in inits and i not in inside})
    used_outside = {i for n in graph.node if id(n) not in block for i in n.input}
    graph_outputs = {o.name for o in graph.output}
    leaving = sorted(t for t in inside if t in used_outside or t in graph_outputs)
    if any(t in graph_outputs for t in leaving):
        return 0  # a graph output would change rank
    prefix = f"conv2d_{sum(1 for i in graph.initializer if i.name.startswith('conv2d_'))}"
    return _rewrite(graph, nodes, inits, prefix, entering=entering, leaving=leaving)


def _rewritable(nodes: Sequence[Any], inits: dict[str, Any], uses: dict[str, int]) -> bool:
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            return False
        if node.op_type in CONV_OPS:
            weight = inits.get(node.input[1]) if len(node.input) > 1 else None
            if weight is None or len(weight.dims) != 3 or uses[weight.name] != 1:
                return False  # a shared kernel cannot be reshaped for one user only
            if any(a.name == "auto_pad" and a.s not in (b"", b"NOTSET") for a in node.attribute):
                return False
        elif node.op_type in ELEMENTWISE_OPS:
            if not scalar_constants_only(node, inits):
                return False  # a per-channel constant would need reshaping too
        else:
            return False
    return True


def _rewrite(graph: Any, nodes: Sequence[Any], inits: dict[str, Any], prefix: str, *,
             entering: Sequence[str], leaving: Sequence[str]) -> int:
    from onnx import helper, numpy_helper

    axes = numpy_helper.from_array(np.array([2], dtype=np.int64), f"{prefix}_axes")
    graph.initializer.append(axes)
    renamed = {name: f"{name}_2d" for name in [*entering, *leaving]}
    added = [helper.make_node("Unsqueeze", [name, axes.name], [renamed[name]],
                              name=f"/{prefix}/in_{k}") for k, name in enumerate(entering)]
    added += [helper.make_node("Squeeze", [renamed[name], axes.name], [name],
                               name=f"/{prefix}/out_{k}") for k, name in enumerate(leaving)]
    converted = 0
    for node in nodes:
        for k, name in enumerate(node.input):
            if name in renamed:
                node.input[k] = renamed[name]
        for k, name in enumerate(node.output):
            if name in renamed:
                node.output[k] = renamed[name]
        if node.op_type in CONV_OPS:
            weight = inits[node.input[1]]
            weight.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(weight)[:, :, None, :], weight.name))
            _widen_attributes(node)
            converted += 1
    drop_shapes_of(graph, nodes)
    insert_sorted(graph, added)
    return converted


def _widen_attributes(node: Any) -> None:
    """1-D convolution attributes -> 2-D with a height of 1 (no padding, stride 1 in height)."""
    for attr in node.attribute:
        values = list(attr.ints)
        if attr.name in _SPATIAL_ATTRS:
            new = [1, *values]
        elif attr.name == "output_padding":
            new = [0, *values]
        elif attr.name == "pads":
            new = [0, values[0], 0, values[1]]
        else:
            continue
        del attr.ints[:]
        attr.ints.extend(new)
