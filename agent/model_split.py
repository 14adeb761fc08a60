"""Split a Piper (VITS) voice graph at the decoder's input.

A VITS voice is two halves: a *front* (text encoder, duration predictor, flow) that turns
phoneme ids into a latent ``[1, C, frames]``, and a HiFi-GAN *decoder* that turns the latent into
audio, ``hop`` samples per frame. The decoder is most of the work and is convolutional, so it
can run on windows of the latent (see :mod:`agent.streaming`): the first part of a sentence can
play while the rest is decoded. This module cuts one ONNX graph into those two graphs.

The cut is the tensor that enters Piper's first decoder node (``/dec/conv_pre/Conv``), followed
upstream through the layout and quantization nodes our int8 recipe puts in front of it
(``Unsqueeze``, ``QuantizeLinear``, ``DequantizeLinear``), so it is the float latent in both the
original and the int8 graph. Everything the model outputs is computed from that latent (and, if
a graph needs them, from the model's own inputs, which the caller feeds to both halves).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DECODER_ANCHOR", "SplitError", "SplitModel", "split_model"]

DECODER_ANCHOR = "/dec/conv_pre/Conv"
"""The name Piper's export gives the decoder's first convolution."""
_LAYOUT_OPS = frozenset({"Unsqueeze", "Squeeze", "Reshape", "QuantizeLinear", "DequantizeLinear",
                         "Identity"})


class SplitError(Exception):
    """The graph has no decoder input this module can cut at."""


@dataclass(frozen=True, slots=True)
class SplitModel:
    """The two halves of a voice graph, serialized ONNX."""

    front: bytes
    """Model inputs -> the latent."""
    decoder: bytes
    """The latent (and any model inputs it needs) -> the model's outputs."""
    latent: str
    """Name of the tensor between them."""
    channels: int
    """Channels of the latent (``[1, channels, frames]``)."""


def split_model(model_path: Path) -> SplitModel:
    """Cut the model at ``model_path`` at its decoder's input. Raises :class:`SplitError`."""
    import onnx

    model = onnx.load(str(model_path))
    graph = model.graph
    latent = _latent(graph)
    channels = _latent_channels(graph)
    inputs = [i.name for i in graph.input]
    front = _subgraph(model, [latent], inputs, f"{graph.name}_front", keep_inputs=True)
    decoder = _subgraph(model, [o.name for o in graph.output], [latent, *inputs],
                        f"{graph.name}_decoder")
    return SplitModel(front.SerializeToString(), decoder.SerializeToString(), latent, channels)


def _latent(graph: Any) -> str:
    producers = {out: node for node in graph.node for out in node.output}
    anchors = [n for n in graph.node if n.name == DECODER_ANCHOR]
    if len(anchors) != 1 or not anchors[0].input:
        raise SplitError(f"no single {DECODER_ANCHOR} node: not a Piper VITS graph")
    tensor = anchors[0].input[0]
    while tensor in producers and producers[tensor].op_type in _LAYOUT_OPS:
        tensor = producers[tensor].input[0]
    if tensor not in producers:
        raise SplitError(f"the decoder's input {tensor!r} is not computed by the graph")
    return str(tensor)


def _latent_channels(graph: Any) -> int:
    """Input channels of the decoder's first convolution (its weight may be behind a
    ``DequantizeLinear``)."""
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {i.name: i for i in graph.initializer}
    anchor = next(n for n in graph.node if n.name == DECODER_ANCHOR)
    weight = anchor.input[1] if len(anchor.input) > 1 else ""
    while weight not in initializers and weight in producers and \
            producers[weight].op_type in _LAYOUT_OPS:
        weight = producers[weight].input[0]
    if weight not in initializers or len(initializers[weight].dims) < 2:
        raise SplitError(f"{DECODER_ANCHOR} has no constant weight")
    return int(initializers[weight].dims[1])


def _subgraph(model: Any, outputs: Sequence[str], stops: Sequence[str], name: str, *,
              keep_inputs: bool = False) -> Any:
    """The nodes that compute ``outputs`` from the tensors in ``stops`` (and initializers), as a
    model whose inputs are the ``stops`` it uses (all of them with ``keep_inputs``, so the front
    keeps the voice's signature)."""
    from onnx import helper

    graph = model.graph
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
            raise SplitError(f"{name}: tensor {tensor!r} has no producer")
        if id(node) not in wanted:
            wanted.add(id(node))
            frontier.extend(node.input)
            frontier.extend(_subgraph_inputs(node))
    nodes = [n for n in graph.node if id(n) in wanted]  # graph order: producers first
    values = {v.name: v for v in (*graph.input, *graph.output, *graph.value_info)}
    inputs = [values.get(s) or helper.make_tensor_value_info(s, 1, None)  # 1 = FLOAT
              for s in stops if keep_inputs or s in needed]
    out_infos = [values.get(o) or helper.make_tensor_value_info(o, 1, None) for o in outputs]
    weights = [initializers[t] for t in sorted(needed & initializers.keys()) if t not in stop_set]
    sub = helper.make_graph(nodes, name, inputs, out_infos, initializer=weights)
    result = helper.make_model(sub, opset_imports=list(model.opset_import),
                               producer_name=model.producer_name)
    result.ir_version = model.ir_version
    return result


def _subgraph_inputs(node: Any) -> Iterable[str]:
    """Outer-scope tensors used inside a node's subgraphs (``If``/``Loop`` bodies)."""
    for attribute in node.attribute:
        for body in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
            inner = {o for n in body.node for o in n.output} | {i.name for i in body.input}
            inner |= {i.name for i in body.initializer}
            for inner_node in body.node:
                yield from (t for t in inner_node.input if t and t not in inner)
                yield from (t for t in _subgraph_inputs(inner_node) if t not in inner)
