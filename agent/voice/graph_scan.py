"""A bounded look at an ONNX model's structure, without loading it into memory.

The voice needs three facts about a model before it serves it, and none of them needs the
weights: whether any tensor keeps its data in an external file (refused: such a file is not
covered by the manifest's sha256, see docs/voices.md), how many symbols the phoneme embedding
has (the ``Gather`` that reads the ``input`` ids), and whether the graph predicts phoneme
durations (Piper's ``/dp/`` nodes: only then does its speaking rate say something about the
sample rate). :func:`scan_model` walks the protobuf wire format field by field and seeks over
every payload it does not need (the weights), so the work is bounded by the number of fields
(:data:`MAX_FIELDS`), the nesting (:data:`MAX_DEPTH`) and the file's size, not by its bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["MAX_DEPTH", "MAX_FIELDS", "ExternalDataError", "GraphScanError", "ModelFacts",
           "Stream", "scan_model"]

MAX_FIELDS = 2_000_000
"""Protobuf fields a model may have; a Piper voice has a small fraction of this."""
MAX_DEPTH = 24
"""Nesting of messages (subgraphs in subgraphs); a Piper voice nests a few levels."""
_MAX_NAME = 4096
_CHUNK = 1 << 16
_PASS_THROUGH = frozenset({"DequantizeLinear", "Identity", "Cast"})
"""Nodes between the embedding's initializer and its Gather (our int8 recipe's, for one)."""

# Message kinds and, per kind, the fields that hold a message of another kind.
_MODEL, _GRAPH, _NODE, _ATTR, _TENSOR, _SPARSE, _VALUE, _FUNCTION, _TRAINING = range(9)
_CHILDREN: dict[int, dict[int, int]] = {
    _MODEL: {7: _GRAPH, 20: _TRAINING, 25: _FUNCTION},
    _GRAPH: {1: _NODE, 5: _TENSOR, 11: _VALUE, 15: _SPARSE},
    _NODE: {5: _ATTR},
    _ATTR: {5: _TENSOR, 6: _GRAPH, 10: _TENSOR, 11: _GRAPH, 22: _SPARSE, 23: _SPARSE},
    _SPARSE: {1: _TENSOR, 2: _TENSOR},
    _FUNCTION: {7: _NODE},
    _TRAINING: {1: _GRAPH, 2: _GRAPH},
}
# Per kind, the string fields kept (names); every other payload is skipped.
_STRINGS: dict[int, frozenset[int]] = {
    _NODE: frozenset({1, 2, 3, 4}), _ATTR: frozenset({1}), _TENSOR: frozenset({8}),
    _VALUE: frozenset({1}),
}
_TENSOR_DIMS, _TENSOR_EXTERNAL, _TENSOR_LOCATION = 1, 13, 14
_ATTR_INT = 3
# Per kind, the integer fields kept (a tensor's shape and data location, an attribute's value).
_INTS: dict[int, frozenset[int]] = {
    _TENSOR: frozenset({_TENSOR_DIMS, _TENSOR_LOCATION}), _ATTR: frozenset({_ATTR_INT}),
}


class Stream(Protocol):
    """What the scan reads from: a binary file, or a reader that hashes what passes."""

    def read(self, count: int, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


class GraphScanError(Exception):
    """The file is not an ONNX model this module can read."""


class ExternalDataError(GraphScanError):
    """A tensor of the model keeps its data in an external file."""


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What :func:`scan_model` found."""

    symbols: int | None
    """Rows of the embedding that the ``input`` ids index; None when no such Gather was
    found (then phoneme ids are not checked against it)."""
    predicts_durations: bool
    """The graph has Piper's duration predictor (nodes named ``/dp/...``)."""


@dataclass(slots=True)
class _Message:
    kind: int
    strings: dict[int, list[str]] = field(default_factory=dict)
    ints: dict[int, list[int]] = field(default_factory=dict)
    children: list[_Message] = field(default_factory=list)


class _Reader:
    """The wire format, read through a buffer of :data:`_CHUNK` bytes (most fields are a few
    bytes: through a Python-level stream such as :class:`agent.voice.files.HashingReader`, one
    ``read`` per field would cost more than the scan); payloads beyond the buffer are skipped
    with a relative ``seek``."""

    def __init__(self, handle: Stream, size: int, keep: Callable[[int, int], bool]) -> None:
        self.handle, self.size, self.pos, self.fields = handle, size, 0, 0
        self.keep = keep
        """``keep(kind, depth)``: whether the children of a message are kept (only the main
        graph's are: deeper ones are only checked)."""
        self.buffer, self.at = b"", 0

    def byte(self) -> int:
        if self.at >= len(self.buffer):
            self.buffer, self.at = self.handle.read(min(_CHUNK, self.size - self.pos)), 0
            if not self.buffer:
                raise GraphScanError("truncated protobuf")
        value = self.buffer[self.at]
        self.at += 1
        self.pos += 1
        return value

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise GraphScanError("malformed varint")

    def read(self, count: int) -> bytes:
        data = self.buffer[self.at:self.at + count]
        self.at += len(data)
        if len(data) < count:
            data += self.handle.read(count - len(data))
        if len(data) != count:
            raise GraphScanError("truncated protobuf")
        self.pos += count
        return data

    def skip(self, count: int) -> None:
        if self.pos + count > self.size:
            raise GraphScanError("a field runs past the end of the file")
        buffered = len(self.buffer) - self.at
        if count <= buffered:
            self.at += count
        else:
            self.handle.seek(count - buffered, 1)
            self.buffer, self.at = b"", 0
        self.pos += count


def _packed(data: bytes) -> list[int]:
    values, shift, current = [], 0, 0
    for byte in data:
        current |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            values.append(current)
            current = shift = 0
    return values


def _walk(reader: _Reader, kind: int, end: int, depth: int) -> _Message:
    """The message of ``kind`` from here to ``end``."""
    if depth > MAX_DEPTH:
        raise GraphScanError(f"messages nested deeper than {MAX_DEPTH}")
    message = _Message(kind)
    ints = _INTS.get(kind, frozenset())
    while reader.pos < end:
        reader.fields += 1
        if reader.fields > MAX_FIELDS:
            raise GraphScanError(f"more than {MAX_FIELDS} protobuf fields")
        tag = reader.varint()
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value = reader.varint()
            if number in ints:
                message.ints.setdefault(number, []).append(value)
        elif wire == 1:
            reader.skip(8)
        elif wire == 5:
            reader.skip(4)
        elif wire == 2:
            _payload(reader, message, (number, end), depth)
        else:
            raise GraphScanError(f"unsupported protobuf wire type {wire}")
        if kind == _TENSOR and number in (_TENSOR_EXTERNAL, _TENSOR_LOCATION):
            _refuse_external(message, number)
    if reader.pos != end:
        raise GraphScanError("a field runs past its message")
    return message


def _payload(reader: _Reader, message: _Message, where: tuple[int, int], depth: int) -> None:
    """A length-delimited field (number, end of its message) of ``message``: a child message,
    a kept string or shape, or a payload skipped unread."""
    kind, (number, end) = message.kind, where
    length = reader.varint()
    stop = reader.pos + length
    if stop > end:
        raise GraphScanError("a field runs past its message")
    children = _CHILDREN.get(kind, {})
    if number in children:
        child = _walk(reader, children[number], stop, depth + 1)
        if reader.keep(kind, depth):
            message.children.append(child)
    elif number in _STRINGS.get(kind, frozenset()) and length <= _MAX_NAME:
        text = reader.read(length).decode("utf-8", "replace")
        message.strings.setdefault(number, []).append(text)
    elif kind == _TENSOR and number == _TENSOR_DIMS and length <= 1024:
        message.ints.setdefault(number, []).extend(_packed(reader.read(length)))
    else:
        reader.skip(length)


def _refuse_external(tensor: _Message, number: int) -> None:
    if number == _TENSOR_LOCATION and tensor.ints.get(number, [0])[-1] != 1:
        return  # DEFAULT: the data is in the model
    name = tensor.strings.get(8, ["?"])[0]
    raise ExternalDataError(f"tensor {name!r} keeps its data in an external file; external data "
                         "is not covered by the manifest, so it is refused")


def scan_model(handle: Stream, size: int) -> ModelFacts:
    """The :class:`ModelFacts` of the ONNX model of ``size`` bytes in ``handle`` (read from its
    current position). Raises :class:`ExternalDataError` for external data; a file that is not
    a well-formed model gets facts that say nothing (onnxruntime refuses it with its reason)."""
    try:
        return _scan(handle, size)
    except ExternalDataError:
        raise
    except GraphScanError:
        return ModelFacts(None, predicts_durations=False)


def _scan(handle: Stream, size: int) -> ModelFacts:

    def keep(kind: int, depth: int) -> bool:
        return (kind == _MODEL and depth == 0) or (kind in (_GRAPH, _NODE) and depth <= 2)

    model = _walk(_Reader(handle, size, keep), _MODEL, size, 0)
    graphs = [c for c in model.children if c.kind == _GRAPH]
    if not graphs:
        raise GraphScanError("no graph in the model")
    return _facts(graphs[0])


def _facts(graph: _Message) -> ModelFacts:
    nodes = [c for c in graph.children if c.kind == _NODE]
    weights = {c.strings.get(8, [""])[0]: c.ints.get(_TENSOR_DIMS, [])
               for c in graph.children if c.kind == _TENSOR}
    producers = {out: node for node in nodes for out in node.strings.get(2, [])}
    symbols = None
    for node in nodes:
        inputs = node.strings.get(1, [])
        if node.strings.get(4) != ["Gather"] or inputs[1:2] != ["input"] or _axis(node) != 0:
            continue
        data = inputs[0]
        for _ in range(8):  # through the int8 recipe's dequantization, for one
            producer = producers.get(data)
            if data in weights or producer is None or producer.strings.get(4, [""])[0] \
                    not in _PASS_THROUGH:
                break
            data = producer.strings.get(1, [""])[0]
        dims = weights.get(data)
        if dims and len(dims) == 2:
            symbols = dims[0]
            break
    durations = any(name.startswith("/dp/") for node in nodes
                    for name in node.strings.get(3, []))
    return ModelFacts(symbols, durations)


def _axis(node: _Message) -> int:
    for attribute in node.children:
        if attribute.strings.get(1) == ["axis"]:
            value = attribute.ints.get(_ATTR_INT, [0])[-1]
            return value - (1 << 64) if value >= 1 << 63 else value
    return 0
