"""Turn a Piper (VITS) voice graph into one that runs its front or its decoder on demand.

:func:`split_model` cuts the graph at the input of the first of :data:`CUT_ANCHORS` it has and
makes the two halves the branches of one ``If`` node: the model gains :data:`LATENT_INPUT` and
:data:`DECODE_INPUT`, false runs the front (output: the latent), true the decoder on a window of
it (:mod:`agent.voice.streaming`). One session, not two, so the halves share one thread pool.
Where it cuts and why: docs/internals.md#splitting-a-voice-graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.voice.files import open_regular

__all__ = ["CUT_ANCHORS", "DECODE_INPUT", "LATENT_INPUT", "DecoderGraph", "Measure",
           "SplitError", "split_model"]

CUT_ANCHORS = ("/dec/ups.1/", "/dec/conv_pre/Conv")
"""Where the graph is cut, in order of preference (names as Piper's export gives them): before the
decoder's second upsampler, so the front also runs the decoder's first stage (a fifth of its
work, at 1/32 of the sample rate) and windows need only the later stages' short receptive field
as context; else before the decoder's first convolution."""
_NO_ANCHOR = f"none of {list(CUT_ANCHORS)} in the graph: not a Piper VITS graph"
LATENT_INPUT = "agent_latent"
DECODE_INPUT = "agent_decode"
_LAYOUT_OPS = frozenset({"Unsqueeze", "Squeeze", "Reshape", "QuantizeLinear", "DequantizeLinear",
                         "Identity"})


class SplitError(Exception):
    """The graph has no decoder input this module can cut at."""


@dataclass(frozen=True, slots=True)
class DecoderGraph:
    """The decoder half alone, for measuring it: serialized ONNX whose inputs are
    :data:`LATENT_INPUT` and whichever of the voice's inputs the decoder reads."""

    graph: bytes
    frame_shape: tuple[int, ...]
    """Shape of the cut tensor without its time axis (``(1, C)`` or ``(1, C, 1)``)."""


Measure = Callable[[DecoderGraph], Mapping[str, str]]
"""Measures the decoder half; what it returns goes into the switchable graph's metadata."""


def split_model(source: Path | bytes, measure: Measure | None = None, *,
                max_bytes: int | None = None) -> bytes:
    """The switchable form of the model ``source`` (the bytes that matched its sha256, or a
    regular file of at most ``max_bytes``, no external data), serialized, with the metadata
    ``measure`` returns for its decoder. Raises :class:`SplitError`."""
    data = _anchored_bytes(source, max_bytes)  # before onnx is imported: it may not need to be
    import onnx
    from onnx import TensorProto, helper
    graph = (model := onnx.load_model_from_string(data)).graph
    latent, frame_shape = _cut(graph)
    if len(graph.output) != 1:
        raise SplitError(f"{len(graph.output)} outputs; a Piper voice has one")
    inputs = [i.name for i in graph.input]
    front_nodes, front_weights = _closure(graph, [latent], inputs)
    decoder_nodes, decoder_weights = _closure(graph, [graph.output[0].name], [latent, *inputs])
    for node in decoder_nodes:
        node.input[:] = [LATENT_INPUT if name == latent else name for name in node.input]
    out = graph.output[0].name
    # Where the weights live, by measurement on en_US-joe-medium: onnxruntime keeps a branch's
    # own initializers twice (all in the branches costs memory), and only optimises the int8
    # decoder fully when its weights are its own (all in the outer graph is slower). So the
    # decoder's weights (a small part) go into its branch and everything else stays outside.
    front_names = {w.name for w in front_weights}
    own = [w for w in decoder_weights if w.name not in front_names]
    own_names = {w.name for w in own}
    outer = {w.name: w for w in (*front_weights, *decoder_weights) if w.name not in own_names}
    decoder = helper.make_graph(decoder_nodes, "decoder", [],
                                [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                                initializer=own)
    front = helper.make_graph(front_nodes, "front", [],
                              [helper.make_tensor_value_info(latent, TensorProto.FLOAT, None)])
    switch = helper.make_node("If", [DECODE_INPUT], ["agent_output"], name="/agent/switch",
                              then_branch=decoder, else_branch=front)
    whole = helper.make_graph(
        [switch], f"{graph.name}_switch",
        [*graph.input,
         helper.make_tensor_value_info(LATENT_INPUT, TensorProto.FLOAT,
                                       [*frame_shape, "frames"]),
         helper.make_tensor_value_info(DECODE_INPUT, TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("agent_output", TensorProto.FLOAT, None)],
        initializer=list(outer.values()))
    result = helper.make_model(whole, opset_imports=list(model.opset_import),
                               producer_name=model.producer_name)
    result.ir_version = model.ir_version
    result.metadata_props.extend(p for p in model.metadata_props  # agent.* only from measure
                                 if not p.key.startswith("agent."))
    if measure is not None:
        reads = _reads(decoder_nodes)
        alone = helper.make_graph(
            decoder_nodes, "decoder",
            [helper.make_tensor_value_info(LATENT_INPUT, TensorProto.FLOAT,
                                           [*frame_shape, "frames"]),
             *(i for i in graph.input if i.name in reads)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
            initializer=[*own, *(w for w in outer.values() if w.name in reads)])
        probe = helper.make_model(alone, opset_imports=list(model.opset_import))
        probe.ir_version = model.ir_version
        for key, value in measure(DecoderGraph(probe.SerializeToString(), frame_shape)).items():
            result.metadata_props.add(key=key, value=value)
    return bytes(result.SerializeToString())


def _anchored_bytes(source: Path | bytes, max_bytes: int | None) -> bytes:
    """The serialized model, if it names one of :data:`CUT_ANCHORS`; raises :class:`SplitError`
    if not. Node names are plain strings in the serialized graph, so this is known without
    importing onnx (a heavy import: ml_dtypes' extension comes with it)."""
    data = source if isinstance(source, bytes) else _read_bounded(source, max_bytes)
    if not any(anchor.encode() in data for anchor in CUT_ANCHORS):
        raise SplitError(_NO_ANCHOR)
    return data


def _read_bounded(model_path: Path, max_bytes: int | None) -> bytes:
    """The bytes of the regular file ``model_path``, of at most ``max_bytes``."""
    with open_regular(model_path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise SplitError(f"{model_path}: {size} bytes, above the {max_bytes} bytes a split "
                             "may read")
        data = handle.read(size + 1)
    if len(data) != size:
        raise SplitError(f"{model_path}: changed while it was read")
    return data


def _reads(nodes: Sequence[Any]) -> set[str]:
    """Every tensor the nodes read (their subgraphs included)."""
    names = {name for node in nodes for name in node.input if name}
    return names | {name for node in nodes for name in _subgraph_inputs(node)}


def _cut(graph: Any) -> tuple[str, tuple[int, ...]]:
    """The tensor to cut at and the shape of one frame of it (``[1, C]`` or ``[1, C, 1]``).

    The first of :data:`CUT_ANCHORS` the graph has wins; the cut is that convolution's input,
    followed back through layout and quantization nodes.
    """
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {i.name: i for i in graph.initializer}
    for pattern in CUT_ANCHORS:
        anchors = [n for n in graph.node
                   if n.name.startswith(pattern) and n.op_type in ("Conv", "ConvTranspose")]
        if not anchors:
            continue
        anchor = anchors[0]
        weight = anchor.input[1] if len(anchor.input) > 1 else ""
        while weight not in initializers and weight in producers and \
                producers[weight].op_type in _LAYOUT_OPS:
            weight = producers[weight].input[0]
        if weight not in initializers or len(initializers[weight].dims) not in (3, 4):
            raise SplitError(f"{anchor.name} has no constant 1-D or 2-D weight")
        dims = list(initializers[weight].dims)
        channels = dims[0] if anchor.op_type == "ConvTranspose" else dims[1]
        rank = len(dims)  # the convolution's input has its weight's rank
        tensor = anchor.input[0]
        while tensor in producers and producers[tensor].op_type in _LAYOUT_OPS:
            op = producers[tensor].op_type
            if op == "Reshape":
                raise SplitError(f"a Reshape in front of {anchor.name}: unknown latent layout")
            rank += {"Unsqueeze": -1, "Squeeze": 1}.get(op, 0)
            tensor = producers[tensor].input[0]
        if tensor not in producers or rank not in (3, 4):
            raise SplitError(f"the input {tensor!r} of {anchor.name} is not a computed 1-D or "
                             "2-D signal")
        return str(tensor), (1, int(channels)) + ((1,) if rank == 4 else ())
    raise SplitError(_NO_ANCHOR)


def _closure(graph: Any, outputs: Sequence[str],
             stops: Sequence[str]) -> tuple[list[Any], list[Any]]:
    """The nodes (graph order) and initializers that compute ``outputs`` from the tensors in
    ``stops``."""
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {i.name: i for i in graph.initializer}
    stop_set = set(stops)
    needed: set[str] = set()
    wanted: set[int] = set()
    frontier = list(outputs)
    while frontier:
        tensor = frontier.pop()
        if tensor in needed or not tensor:
            continue
        needed.add(tensor)
        if tensor in stop_set or tensor in initializers:
            continue
        node = producers.get(tensor)
        if node is None:
            raise SplitError(f"tensor {tensor!r} has no producer")
        if id(node) not in wanted:
            wanted.add(id(node))
            frontier.extend(node.input)
            frontier.extend(_subgraph_inputs(node))
    nodes = [n for n in graph.node if id(n) in wanted]
    weights = [initializers[t] for t in sorted(needed & initializers.keys()) if t not in stop_set]
    return nodes, weights


def _subgraph_inputs(node: Any) -> Iterable[str]:
    """Outer-scope tensors used inside a node's subgraphs (``If``/``Loop`` bodies)."""
    for attribute in node.attribute:
        for body in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
            inner = {o for n in body.node for o in n.output} | {i.name for i in body.input}
            inner |= {i.name for i in body.initializer}
            for inner_node in body.node:
                yield from (t for t in inner_node.input if t and t not in inner)
                yield from (t for t in _subgraph_inputs(inner_node) if t not in inner)
