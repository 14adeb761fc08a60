"""Small helpers the layout rewrites share: node attributes, use counts, topological order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CONV_OPS",
    "ELEMENTWISE_OPS",
    "attr_int",
    "attr_ints",
    "drop_shapes_of",
    "insert_sorted",
    "scalar_constants_only",
    "use_counts",
]

CONV_OPS = frozenset({"Conv", "ConvTranspose"})
ELEMENTWISE_OPS = frozenset({"LeakyRelu", "Relu", "Tanh", "Sigmoid", "Add", "Sub", "Mul", "Div"})


def attr_ints(node: Any, name: str, default: list[int]) -> list[int]:
    """The integer-list attribute ``name`` of ``node``, or ``default``."""
    for attr in node.attribute:
        if attr.name == name:
            return list(attr.ints)
    return default


def attr_int(node: Any, name: str, default: int) -> int:
    """The integer attribute ``name`` of ``node``, or ``default``."""
    for attr in node.attribute:
        if attr.name == name:
            return int(attr.i)
    return default


def use_counts(graph: Any) -> dict[str, int]:
    """How many node inputs read each tensor."""
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    return uses


def scalar_constants_only(node: Any, inits: dict[str, Any]) -> bool:
    """True when every initializer ``node`` reads is a scalar (no per-channel constant)."""
    return not any(name in inits and int(np.prod(inits[name].dims)) != 1 for name in node.input)


def drop_shapes_of(graph: Any, nodes: Iterable[Any]) -> None:
    """Forget the recorded shapes of ``nodes``' outputs (stale after a rewrite; onnxruntime
    infers them again)."""
    stale = {o for n in nodes for o in n.output}
    kept = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(kept)


def insert_sorted(graph: Any, added: Sequence[Any]) -> None:
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
