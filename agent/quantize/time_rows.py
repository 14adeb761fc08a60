"""A height-1 block run on overlapping windows of its time axis stacked as rows (exact).

onnxruntime splits a blocked 2-D convolution's work by rows, so a height-1 block with few
channels runs on one thread only. :func:`fold_time_into_rows` cuts the block's input into
``rows`` overlapping windows stacked along the height axis (``[N, C, rows, W]``), runs the block
on them, and joins the middles of the windows again. The windows overlap by more than the
block's receptive field and each window's outer edges are the sequence's own ends or are cut
away, so the result is exact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from agent.quantize.graph import (
    CONV_OPS,
    ELEMENTWISE_OPS,
    attr_ints,
    drop_shapes_of,
    insert_sorted,
    scalar_constants_only,
)
from agent.quantize.polyphase import upsampler_shape

__all__ = ["fold_time_into_rows"]

_FOLDABLE_OPS = ELEMENTWISE_OPS | CONV_OPS


class _Nodes:
    """Builds the folding nodes: named constants (added to the graph) and operators."""

    def __init__(self, graph: Any, prefix: str) -> None:
        self.graph, self.prefix = graph, prefix
        self.added: list[Any] = []

    def const(self, name: str, value: int) -> str:
        from onnx import numpy_helper

        self.graph.initializer.append(numpy_helper.from_array(np.array([value], np.int64),
                                                              f"{self.prefix}/{name}"))
        return f"{self.prefix}/{name}"

    def op(self, kind: str, inputs: list[str], name: str, **attrs: Any) -> str:
        from onnx import helper

        out = f"{self.prefix}/{name}_output"
        self.added.append(helper.make_node(kind, inputs, [out], name=f"{self.prefix}/{name}",
                                           **attrs))
        return out

    def node(self, kind: str, inputs: list[str], output: str, name: str, **attrs: Any) -> None:
        from onnx import helper

        self.added.append(helper.make_node(kind, inputs, [output],
                                           name=f"{self.prefix}/{name}", **attrs))


def fold_time_into_rows(model: Any, start: str, end: str, rows: int) -> int:
    """Run the height-1 block from the first input of the node matching ``start`` to the output
    of the node matching ``end`` (regular expressions, searched; one node each) on ``rows``
    overlapping windows of the time axis, in place.

    Returns the number of convolutions in the folded block; 0 means the block is absent or not
    foldable (only height-1 convolutions and element-wise ops with scalar constants, nothing
    leaving the block but ``end``'s output), and the model is then untouched.
    """
    graph = model.graph
    starts = [n for n in graph.node if re.search(start, n.name)]
    ends = [n for n in graph.node if re.search(end, n.name)]
    if rows < 2 or len(starts) != 1 or len(ends) != 1:
        return 0
    entering, leaving = starts[0].input[0], ends[0].output[0]
    inits = {i.name: i for i in graph.initializer}
    block = _block_between(graph, entering, leaving)
    if block is None or not _foldable(block, inits):
        return 0
    measured = _rate_and_radius(block, inits, entering, leaving)
    if measured is None:
        return 0
    scale, radius = measured
    nodes = _Nodes(graph, f"/rows_{sum(1 for n in graph.node if n.name.startswith('/rows_'))}")
    folded_in, folded_out = f"{entering}_rows", f"{leaving}_rows"
    for node in block:
        node.input[:] = [folded_in if name == entering else name for name in node.input]
        node.output[:] = [folded_out if name == leaving else name for name in node.output]
    window_starts, width = _fold(nodes, entering, folded_in, rows, halo=radius + 1)
    _unfold(nodes, folded_out, leaving, window_starts=window_starts, width=width, scale=scale)
    drop_shapes_of(graph, block)
    insert_sorted(graph, nodes.added)
    return sum(1 for n in block if n.op_type in CONV_OPS)


def _fold(nodes: _Nodes, entering: str, folded_in: str, rows: int,
          halo: int) -> tuple[list[str], str]:
    """Stack ``rows`` windows of ``entering`` as ``folded_in``; their starts and width."""
    const, op = nodes.const, nodes.op
    time_axis = const("time_axis", 3)
    const("zero", 0)
    # Window width W = min(L, ceil(L / rows) + 2 * halo); window i starts at
    # i * (L - W) / (rows - 1).
    length = op("Shape", [entering], "length", start=3, end=4)
    width = op("Min", [length, op("Add", [op("Div", [op("Add", [length, const("rows_1", rows - 1)],
                                                        "ceil"), const("rows", rows)], "per_row"),
                                          const("halos", 2 * halo)], "padded")], "width")
    spare = op("Sub", [length, width], "spare")
    window_starts = [op("Div", [op("Mul", [spare, const(f"index_{i}", i)], f"offset_{i}"),
                                f"{nodes.prefix}/rows_1"], f"start_{i}") for i in range(rows)]
    windows = [op("Slice", [entering, s, op("Add", [s, width], f"stop_{i}"), time_axis],
                  f"window_{i}") for i, s in enumerate(window_starts)]
    nodes.node("Concat", windows, folded_in, "fold", axis=2)
    return window_starts, width


def _unfold(nodes: _Nodes, folded_out: str, leaving: str, *, window_starts: Sequence[str],
            width: str, scale: int) -> None:
    """Join the middles of the rows of ``folded_out`` as ``leaving``: window i keeps
    ``[cut_i, cut_i+1)`` (cuts halfway through the overlaps), in output samples."""
    const, op, prefix = nodes.const, nodes.op, nodes.prefix
    rows = len(window_starts)
    two, factor = const("two", 2), const("scale", scale)
    cuts = [op("Div", [op("Add", [op("Add", [window_starts[i - 1], window_starts[i]], f"pair_{i}"),
                                  width], f"span_{i}"), two], f"cut_{i}") for i in range(1, rows)]
    pieces = []
    for i in range(rows):
        row = op("Slice", [folded_out, const(f"row_{i}", i), const(f"row_end_{i}", i + 1),
                           const("height_axis", 2) if i == 0 else f"{prefix}/height_axis"],
                 f"row_{i}")
        first = (op("Mul", [op("Sub", [cuts[i - 1], window_starts[i]], f"first_{i}"), factor],
                    f"first_out_{i}") if i else f"{prefix}/zero")
        last = (op("Mul", [op("Sub", [cuts[i], window_starts[i]], f"last_{i}"), factor],
                   f"last_out_{i}") if i < rows - 1 else const("to_end", 1 << 62))
        pieces.append(op("Slice", [row, first, last, f"{prefix}/time_axis"], f"piece_{i}"))
    nodes.node("Concat", pieces, leaving, "unfold", axis=3)


def _rate_and_radius(nodes: Sequence[Any], inits: dict[str, Any], entering: str,
                     leaving: str) -> tuple[int, int] | None:
    """The block's upsampling factor and an upper bound of its receptive field (in samples of
    its input, summed over all convolutions); None when an upsampler is not exact."""
    rate = {entering: 1}
    radius = 0
    for node in nodes:  # graph order: producers first
        here = max(rate.get(name, 1) for name in node.input if name)
        pad = max(attr_ints(node, "pads", [0, 0, 0, 0]))
        if node.op_type == "ConvTranspose":
            shape = upsampler_shape(node, inits)
            if shape is None:
                return None
            radius += -(-pad // (here * shape[0])) + 1
            here *= shape[0]
        elif node.op_type == "Conv":
            radius += -(-pad // here) + 1
        for name in node.output:
            rate[name] = here
    return rate[leaving], radius


def _block_between(graph: Any, entering: str, leaving: str) -> list[Any] | None:
    """The nodes on the way from tensor ``entering`` to tensor ``leaving``, when nothing else
    enters or leaves that block; else None."""
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    inits = {i.name for i in graph.initializer}
    block: dict[int, Any] = {}
    frontier = [entering]
    while frontier:
        tensor = frontier.pop()
        if tensor == leaving:
            continue
        for node in consumers.get(tensor, []):
            if id(node) not in block:
                block[id(node)] = node
                frontier.extend(node.output)
    nodes = [n for n in graph.node if id(n) in block]  # graph order: producers first
    produced = {o for n in nodes for o in n.output}
    graph_outputs = {o.name for o in graph.output}
    if leaving not in produced or entering in graph_outputs:
        return None
    for node in nodes:
        if any(i and i not in produced and i not in inits and i != entering for i in node.input):
            return None  # another tensor enters the block
        for out in node.output:
            if out != leaving and (out in graph_outputs or any(
                    id(c) not in block for c in consumers.get(out, []))):
                return None  # a tensor leaves the block elsewhere
    return nodes


def _foldable(nodes: Sequence[Any], inits: dict[str, Any]) -> bool:
    for node in nodes:
        if node.domain not in ("", "ai.onnx") or node.op_type not in _FOLDABLE_OPS:
            return False
        if node.op_type in CONV_OPS:
            weight = inits.get(node.input[1]) if len(node.input) > 1 else None
            if (weight is None or len(weight.dims) != 4 or weight.dims[2] != 1
                    or (node.op_type == "Conv" and attr_ints(node, "strides", [1, 1]) != [1, 1])):
                return False
            pads = attr_ints(node, "pads", [0, 0, 0, 0])
            if len(pads) != 4 or pads[0] != 0 or pads[2] != 0:
                return False
        elif not scalar_constants_only(node, inits):
            return False
    return True
