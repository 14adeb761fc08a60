"""Layout rewrites of ONNX voice graphs that keep the arithmetic and speed up onnxruntime.

Piper's HiFi-GAN decoder is a chain of 1-D convolutions (tensors ``[N, C, T]``). onnxruntime
runs 1-D convolutions through im2col + GEMM, and on its int8 path wraps every fused
``QLinearConv`` in layout transposes. The same block written as 2-D convolutions with a height
of 1 (``[N, C, 1, T]``) gets onnxruntime's blocked 2-D kernels (NCHWc on x86) and keeps one
channels-last layout through chains of int8 convolutions. :func:`convs_as_2d` does that
rewrite; the arithmetic is unchanged (outputs agree to float rounding: 121 dB SNR on the
en_US-joe-medium voice).

Two more exact rewrites work on such a height-1 block:

* :func:`upsamplers_as_convs` turns a ``ConvTranspose`` upsampler (stride ``s``, output ``s``
  times its input) into its polyphase form: one ``Conv`` with ``s`` times the output channels,
  then an interleave (``Reshape``/``Transpose``/``Reshape``). The ``Conv`` can be quantized
  (onnxruntime has no int8 ``ConvTranspose`` on CPU) and avoids col2im.
* :func:`fold_time_into_rows` cuts the time axis of a block into ``rows`` overlapping
  windows stacked along the height axis (``[N, C, rows, W]``), runs the block on them and
  joins the middles of the windows again. onnxruntime splits a blocked convolution's work
  by rows, so a height-1 block with few channels runs on one thread only; with rows it
  runs on as many. The windows overlap by more than the block's receptive field and each
  window's outer edges are the sequence's own ends or are cut away, so the result is exact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["convs_as_2d", "fold_time_into_rows", "upsamplers_as_convs"]

_CONV_OPS = frozenset({"Conv", "ConvTranspose"})
_ELEMENTWISE_OPS = frozenset({"LeakyRelu", "Relu", "Tanh", "Sigmoid", "Add", "Sub", "Mul", "Div"})
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
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
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
        if node.op_type in _CONV_OPS:
            weight = inits.get(node.input[1]) if len(node.input) > 1 else None
            if weight is None or len(weight.dims) != 3 or uses[weight.name] != 1:
                return False  # a shared kernel cannot be reshaped for one user only
            if any(a.name == "auto_pad" and a.s not in (b"", b"NOTSET") for a in node.attribute):
                return False
        elif node.op_type in _ELEMENTWISE_OPS:
            if any(name in inits and int(np.prod(inits[name].dims)) != 1 for name in node.input):
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
        if node.op_type in _CONV_OPS:
            weight = inits[node.input[1]]
            weight.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(weight)[:, :, None, :], weight.name))
            _widen_attributes(node)
            converted += 1
    # Shapes recorded for the block's tensors are stale; onnxruntime infers them again.
    stale = {o for n in nodes for o in n.output}
    kept = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    _insert_sorted(graph, added)
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


def _insert_sorted(graph: Any, added: Sequence[Any]) -> None:
    """Add nodes and restore a topological order (producers before consumers)."""
    nodes = [*graph.node, *added]
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    order: list[int] = []
    seen: set[int] = set()
    for root in range(len(nodes)):
        stack = [(root, False)]
        while stack:
            k, expanded = stack.pop()
            if expanded:
                order.append(k)
                continue
            if k in seen:
                continue
            seen.add(k)
            stack.append((k, True))
            stack.extend((producer[name], False) for name in nodes[k].input
                         if name in producer and producer[name] not in seen)
    ordered = [nodes[k] for k in order]
    del graph.node[:]
    graph.node.extend(ordered)


# --- polyphase upsamplers --------------------------------------------------------------------


def _ints(node: Any, name: str, default: list[int]) -> list[int]:
    for attr in node.attribute:
        if attr.name == name:
            return list(attr.ints)
    return default


def _int(node: Any, name: str, default: int) -> int:
    for attr in node.attribute:
        if attr.name == name:
            return int(attr.i)
    return default


def _upsampler(node: Any, inits: dict[str, Any]) -> tuple[int, int] | None:
    """(stride, padding) of a height-1 2-D ``ConvTranspose`` whose output is exactly ``stride``
    times its input, or None when ``node`` is not one."""
    if node.op_type != "ConvTranspose" or node.domain not in ("", "ai.onnx"):
        return None
    weight = inits.get(node.input[1]) if len(node.input) > 1 else None
    if weight is None or len(weight.dims) != 4 or weight.dims[2] != 1:
        return None
    kernel = int(weight.dims[3])
    strides = _ints(node, "strides", [1, 1])
    pads = _ints(node, "pads", [0, 0, 0, 0])
    if (_int(node, "group", 1) != 1 or _ints(node, "dilations", [1, 1]) != [1, 1]
            or strides[0] != 1 or pads[0] != 0 or pads[2] != 0 or pads[1] != pads[3]
            or _ints(node, "output_padding", [0, 0]) != [0, 0]
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

    Output phase ``r`` of a transposed convolution with stride ``s`` and kernel ``K`` is an
    ordinary convolution of the input with the taps ``r', r' + s, ...`` of the kernel; the ``s``
    phases become the output channels of one ``Conv`` (named ``<block>/PolyConv``), and
    ``[N, s, C, H*W] -> [N, C, H*W, s] -> [N, C, H, W*s]`` interleaves them. Only upsamplers
    whose output is exactly ``s`` times longer than their input (``K - 2 * pad == s``) are
    rewritten; the height may be any (see :func:`fold_time_into_rows`).
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    matcher = re.compile(pattern)
    inits = {i.name: i for i in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    rewritten: list[Any] = []
    converted = 0
    for node in graph.node:
        shape = _upsampler(node, inits) if matcher.search(node.name) else None
        if shape is None or uses[node.input[1]] != 1:
            rewritten.append(node)
            continue
        stride, pad = shape
        weight = numpy_helper.to_array(inits[node.input[1]])  # [C_in, C_out, 1, K]
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
        base = node.name.rsplit("/", 1)[0]
        out = node.output[0]
        names = {key: f"{out}_poly_{key}" for key in
                 ("w", "b", "conv", "phases", "mixed", "shape1", "height", "head", "tail",
                  "shape2")}
        graph.initializer.append(numpy_helper.from_array(poly, names["w"]))
        inputs = [node.input[0], names["w"]]
        if len(node.input) > 2 and node.input[2]:
            bias = numpy_helper.to_array(inits[node.input[2]])
            graph.initializer.append(numpy_helper.from_array(np.tile(bias, stride), names["b"]))
            inputs.append(names["b"])
        for key, value in (("shape1", [0, stride, c_out, -1]), ("head", [0, c_out]),
                           ("tail", [-1])):
            graph.initializer.append(numpy_helper.from_array(np.array(value, np.int64),
                                                             names[key]))
        rewritten += [
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
        converted += 1
    if converted:
        used = {name for n in rewritten for name in n.input}
        kept = [i for i in graph.initializer if i.name in used]
        del graph.node[:]
        graph.node.extend(rewritten)
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return converted


# --- time folded into rows -------------------------------------------------------------------

_FOLDABLE_OPS = _ELEMENTWISE_OPS | {"Conv", "ConvTranspose"}


def fold_time_into_rows(model: Any, start: str, end: str, rows: int) -> int:
    """Run the height-1 block from the first input of the node matching ``start`` to the output
    of the node matching ``end`` (regular expressions, searched; one node each) on ``rows``
    overlapping windows of the time axis, in place.

    Returns the number of convolutions in the folded block; 0 means the block is absent or not
    foldable (only height-1 convolutions and element-wise ops with scalar constants, nothing
    leaving the block but ``end``'s output), and the model is then untouched.
    """
    from onnx import helper, numpy_helper

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
    halo = radius + 1

    prefix = f"/rows_{sum(1 for n in graph.node if n.name.startswith('/rows_'))}"
    added: list[Any] = []

    def const(name: str, value: int) -> str:
        graph.initializer.append(numpy_helper.from_array(np.array([value], np.int64),
                                                         f"{prefix}/{name}"))
        return f"{prefix}/{name}"

    def op(kind: str, inputs: list[str], name: str, **attrs: Any) -> str:
        out = f"{prefix}/{name}_output"
        added.append(helper.make_node(kind, inputs, [out], name=f"{prefix}/{name}", **attrs))
        return out

    folded_in, folded_out = f"{entering}_rows", f"{leaving}_rows"
    for node in block:
        node.input[:] = [folded_in if name == entering else name for name in node.input]
        node.output[:] = [folded_out if name == leaving else name for name in node.output]
    time_axis, zero = const("time_axis", 3), const("zero", 0)
    # Window width W = min(L, ceil(L / rows) + 2 * halo); window i starts at
    # i * (L - W) / (rows - 1).
    length = op("Shape", [entering], "length", start=3, end=4)
    width = op("Min", [length, op("Add", [op("Div", [op("Add", [length, const("rows_1", rows - 1)],
                                                        "ceil"), const("rows", rows)], "per_row"),
                                          const("halos", 2 * halo)], "padded")], "width")
    spare = op("Sub", [length, width], "spare")
    window_starts = [op("Div", [op("Mul", [spare, const(f"index_{i}", i)], f"offset_{i}"),
                                f"{prefix}/rows_1"], f"start_{i}") for i in range(rows)]
    windows = [op("Slice", [entering, s, op("Add", [s, width], f"stop_{i}"), time_axis],
                  f"window_{i}") for i, s in enumerate(window_starts)]
    added.append(helper.make_node("Concat", windows, [folded_in], name=f"{prefix}/fold", axis=2))
    # Window i keeps [cut_i, cut_i+1) (cuts halfway through the overlaps), in output samples.
    two, factor = const("two", 2), const("scale", scale)
    cuts = [op("Div", [op("Add", [op("Add", [window_starts[i - 1], window_starts[i]], f"pair_{i}"),
                                  width], f"span_{i}"), two], f"cut_{i}") for i in range(1, rows)]
    pieces = []
    for i in range(rows):
        row = op("Slice", [folded_out, const(f"row_{i}", i), const(f"row_end_{i}", i + 1),
                           const("height_axis", 2) if i == 0 else f"{prefix}/height_axis"],
                 f"row_{i}")
        first = (op("Mul", [op("Sub", [cuts[i - 1], window_starts[i]], f"first_{i}"), factor],
                    f"first_out_{i}") if i else zero)
        last = (op("Mul", [op("Sub", [cuts[i], window_starts[i]], f"last_{i}"), factor],
                   f"last_out_{i}") if i < rows - 1 else const("to_end", 1 << 62))
        pieces.append(op("Slice", [row, first, last, time_axis], f"piece_{i}"))
    added.append(helper.make_node("Concat", pieces, [leaving], name=f"{prefix}/unfold", axis=3))
    stale = {o for n in block for o in n.output}
    kept = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    _insert_sorted(graph, added)
    return sum(1 for n in block if n.op_type in _CONV_OPS)


def _rate_and_radius(nodes: Sequence[Any], inits: dict[str, Any], entering: str,
                     leaving: str) -> tuple[int, int] | None:
    """The block's upsampling factor and an upper bound of its receptive field (in samples of
    its input, summed over all convolutions); None when an upsampler is not exact."""
    rate = {entering: 1}
    radius = 0
    for node in nodes:  # graph order: producers first
        here = max(rate.get(name, 1) for name in node.input if name)
        pad = max(_ints(node, "pads", [0, 0, 0, 0]))
        if node.op_type == "ConvTranspose":
            shape = _upsampler(node, inits)
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
        if node.op_type in _CONV_OPS:
            weight = inits.get(node.input[1]) if len(node.input) > 1 else None
            if (weight is None or len(weight.dims) != 4 or weight.dims[2] != 1
                    or (node.op_type == "Conv" and _ints(node, "strides", [1, 1]) != [1, 1])):
                return False
            pads = _ints(node, "pads", [0, 0, 0, 0])
            if len(pads) != 4 or pads[0] != 0 or pads[2] != 0:
                return False
        elif any(name in inits and int(np.prod(inits[name].dims)) != 1 for name in node.input):
            return False
    return True
