"""A bounded reader of an ONNX model's graph: what its rope is read from, never its weights.

The ``.onnx`` file is a ``ModelProto`` (onnx.proto, protobuf's wire format: :mod:`.wire`). Of
it the reader keeps the producer, the opsets, and in the graph and every subgraph of an ``If``,
``Loop`` or ``Scan`` (nested at most :data:`MAX_DEPTH` deep): the nodes that take a rope cache
or are a layer's attention (:data:`.rules.ROPE_OPS`, :data:`.rules.ATTENTION_OPS`), the nodes a
cache's name or a branch's condition may come through (:data:`.rules.TRACED_OPS`), and every
initializer as its name, type, shape and where its values are — a span of the body, or a
range of an external data file (``location``, ``offset``, ``length``). Every other node is
stepped over once its operator is known. Every count and size is held to the bytes that are
there and to the caps below before anything is built; every field stepped over is counted
against :class:`.wire.Budget`.

>>> producer = bytes([0x12, 0x03]) + b"ort"  # field 2, 3 bytes
>>> graph = bytes([0x3A, 0x00])  # field 7, an empty GraphProto
>>> model = read(producer + graph)
>>> model.producer_name, model.graph.nodes
('ort', ())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.onnx import rules
from posenc.schemes.rope.onnx.wire import (
    I32,
    LEN,
    VARINT,
    Budget,
    Data,
    GraphTooLargeError,
    ONNXError,
    fields,
    packed_varints,
    signed,
    text,
)

# Fields stepped over in one request at most (≈ 1.8 µs each for the smallest, measured): a
# builder's graph of 48 layers of 128 experts each, decomposed for DirectML, has about 2^18.
MAX_FIELDS = 1 << 19
# Subgraphs inside subgraphs at most (If branches of If branches …).
MAX_DEPTH = 8
# Kept nodes and initializers at most, over all graphs.
MAX_KEPT = 1 << 15
MAX_INITIALIZERS = 1 << 17
MAX_DIMS = 8
# Values of a tensor kept as varints (int32_data, int64_data: float16 bits, say) at most.
MAX_PACKED = 1 << 18
# Inputs or outputs of one kept node at most (GroupQueryAttention has 16).
MAX_NODE_VALUES = 64

# Bytes of one varint at most: a packed list of n values is at most 10·n bytes.
_LONGEST_VARINT = 10

# Element sizes of the data types whose values are read (TensorProto.DataType).
ITEMSIZE = {1: 4, 2: 1, 3: 1, 6: 4, 7: 8, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}


# Named tuples, not dataclasses: a graph may hold 2^16 kept nodes and 2^18 initializers, and a
# frozen dataclass's __init__ costs several times a tuple's.
class External(NamedTuple):
    location: str
    offset: int
    length: int


class Tensor(NamedTuple):
    """A tensor as the file stores it: in the body (``field`` names the TensorProto field of
    its values, ``span`` where they are) or in external data."""

    name: str
    data_type: int
    dims: tuple[int, ...]
    field: str | None = None
    span: tuple[int, int] = (0, 0)
    external: External | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.dims, dtype=object)) if self.dims else 1


class Node(NamedTuple):
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    ints: dict[str, int]
    floats: dict[str, float]
    value: Tensor | None
    graphs: dict[str, Graph]


@dataclass(frozen=True)
class Graph:
    """One graph's kept nodes, initializers, and its outputs' names (a branch's, in order)."""

    nodes: tuple[Node, ...]
    initializers: dict[str, Tensor]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Model:
    ir_version: int
    producer_name: str
    producer_version: str
    opsets: dict[str, int]
    graph: Graph
    data: Data  # the body, which the spans index


class _Reader:
    def __init__(self, data: Data) -> None:
        self.data = data
        self.budget = Budget(MAX_FIELDS)
        self.kept = 0
        self.initializers = 0

    def graph(self, lo: int, hi: int, depth: int) -> Graph:
        if depth > MAX_DEPTH:
            raise ONNXError(f"subgraphs nest more than {MAX_DEPTH} deep at byte {lo}")
        nodes: list[Node] = []
        initializers: dict[str, Tensor] = {}
        outputs: list[str] = []
        for number, wire, a, b in fields(self.data, lo, hi, self.budget):
            if wire != LEN:
                continue
            if number == 1:
                node = self.node(a, b, depth)
                if node is not None:
                    nodes.append(node)
            elif number == 5:
                self.initializers += 1
                if self.initializers > MAX_INITIALIZERS:
                    raise GraphTooLargeError(
                        f"the graph holds more than {MAX_INITIALIZERS} initializers"
                    )
                tensor = self.tensor(a, b)
                initializers[tensor.name] = tensor
            elif number == 12:
                outputs.append(self.value_name(a, b))
        return Graph(tuple(nodes), initializers, tuple(outputs))

    def value_name(self, lo: int, hi: int) -> str:
        for number, wire, a, b in fields(self.data, lo, hi, self.budget):
            if number == 1 and wire == LEN:
                return text(self.data, a, b)
        return ""

    def node(self, lo: int, hi: int, depth: int) -> Node | None:
        found = list(fields(self.data, lo, hi, self.budget))
        strings = {}
        for number, wire, a, b in found:
            if wire == LEN and number in (3, 4, 7):
                strings[number] = (a, b)
        # Most nodes are none of those kept: known by their op_type's bytes, never decoded.
        if bytes(self.data[slice(*strings.get(4, (0, 0)))]) not in _KEPT_OPS:
            return None
        op_type = text(self.data, *strings.get(4, (0, 0)), 128)
        domain = text(self.data, *strings.get(7, (0, 0)), 128)
        domain = "" if domain == "ai.onnx" else domain
        key = (domain, op_type)
        kept = (
            key in rules.ROPE_OP_OF
            or key in rules.ATTENTION_OPS
            or (domain == "" and op_type in rules.TRACED_OPS | rules.SUBGRAPH_OPS)
        )
        if not kept:
            return None
        self.kept += 1
        if self.kept > MAX_KEPT:
            raise GraphTooLargeError(f"the graph holds more than {MAX_KEPT} nodes of interest")
        values: dict[int, list[str]] = {1: [], 2: []}
        attributes: list[tuple[int, int]] = []
        for number, wire, a, b in found:
            if wire != LEN:
                continue
            if number in values:
                if len(values[number]) >= MAX_NODE_VALUES:
                    raise ONNXError(
                        f"node {op_type} at byte {lo} has over {MAX_NODE_VALUES} "
                        f"{'inputs' if number == 1 else 'outputs'}"
                    )
                values[number].append(text(self.data, a, b))
            elif number == 5:
                attributes.append((a, b))
        walk = domain == "" and op_type in rules.SUBGRAPH_OPS
        node = Node(
            text(self.data, *strings.get(3, (0, 0))),
            op_type,
            domain,
            tuple(values[1]),
            tuple(values[2]),
            {},
            {},
            None,
            {},
        )
        for a, b in attributes:
            value = self.attribute(node, a, b, depth, walk)
            if value is not None:
                node = node._replace(value=value)
        return node

    def attribute(self, node: Node, lo: int, hi: int, depth: int, walk: bool) -> Tensor | None:
        """Keeps an attribute in ``node``'s dicts; a ``value`` tensor (a Constant's) returned.
        Lists of ints are stepped over: nothing the reader follows is one, and a packed list's
        bytes (a span, never decoded) or an unpacked one's fields (counted) cost no more."""
        found = list(fields(self.data, lo, hi, self.budget))
        name = next((text(self.data, a, b, 256) for n, w, a, b in found if n == 1 and w == LEN), "")
        value = None
        for number, wire, a, b in found:
            if number == 3 and wire == VARINT:
                node.ints[name] = signed(a)
            elif number == 2 and wire == I32:
                node.floats[name] = float(np.frombuffer(self.data, "<f4", 1, a)[0])
            elif number == 5 and wire == LEN and name == "value":
                value = self.tensor(a, b)
            elif number == 6 and wire == LEN and walk:
                node.graphs[name] = self.graph(a, b, depth + 1)
            elif number == 11 and wire == LEN and walk:
                node.graphs[f"{name}.{len(node.graphs)}"] = self.graph(a, b, depth + 1)
        return value

    def tensor(self, lo: int, hi: int) -> Tensor:
        dims: list[int] = []
        name, data_type, location = "", 0, 0
        where: dict[str, tuple[int, int]] = {}
        external: dict[str, str] = {}
        for number, wire, a, b in fields(self.data, lo, hi, self.budget):
            if number == 1:
                dims += self.dims(wire, a, b, lo)
                if len(dims) > MAX_DIMS:
                    raise ONNXError(f"a tensor at byte {lo} has more than {MAX_DIMS} dimensions")
            elif number == 2 and wire == VARINT:
                data_type = a
            elif number == 8 and wire == LEN:
                name = text(self.data, a, b)
            elif number == 14 and wire == VARINT:
                location = a
            elif number == 13 and wire == LEN:
                key, value = self.entry(a, b)
                external[key] = value
            elif wire == LEN and number in _DATA_FIELDS:
                where[_DATA_FIELDS[number]] = (a, b)
        if any(d < 0 for d in dims):
            raise ONNXError(f"tensor {name!r} has a negative dimension {dims}")
        if location == 1:
            return Tensor(name, data_type, tuple(dims), external=self.external(name, external))
        kind, span = next(iter(where.items()), (None, (0, 0)))
        return Tensor(name, data_type, tuple(dims), kind, span)

    def dims(self, wire: int, a: int, b: int, at: int) -> list[int]:
        if wire == VARINT:
            return [signed(a)]
        if wire != LEN:
            raise ONNXError(f"a tensor's dims at byte {at} are not integers")
        # A varint is 10 bytes at most: a longer packed list holds too many to decode.
        if b - a > _LONGEST_VARINT * MAX_DIMS:
            raise ONNXError(f"a tensor at byte {at} has more than {MAX_DIMS} dimensions")
        return [signed(int(v)) for v in packed_varints(self.data, a, b)]

    def entry(self, lo: int, hi: int) -> tuple[str, str]:
        pair = {
            n: text(self.data, a, b)
            for n, w, a, b in fields(self.data, lo, hi, self.budget)
            if w == LEN and n in (1, 2)
        }
        return pair.get(1, ""), pair.get(2, "")

    def external(self, name: str, entries: dict[str, str]) -> External:
        location = entries.get("location", "")
        if not location or "\0" in location or len(location) > 1024:
            raise ONNXError(f"tensor {name!r} is external data without a usable location")
        numbers = []
        for key in ("offset", "length"):
            value = entries.get(key, "0" if key == "offset" else "")
            if not value.isascii() or not value.isdigit() or len(value) > 19:
                raise ONNXError(f"tensor {name!r} has external data {key} {value[:40]!r}")
            numbers.append(int(value))
        return External(location, numbers[0], numbers[1])


# The op_type of every node the reader may keep, as the bytes a file spells it in.
_KEPT_OPS = frozenset(
    name.encode()
    for name in (
        *(op for _, op in rules.ROPE_OP_OF),
        *(op for _, op in rules.ATTENTION_OPS),
        *rules.TRACED_OPS,
        *rules.SUBGRAPH_OPS,
    )
)
# TensorProto's fields that hold values, by number.
_DATA_FIELDS = {9: "raw_data", 4: "float_data", 5: "int32_data", 7: "int64_data", 10: "double_data"}


def read(data: Data) -> Model:
    """The model in ``data``, kept as the module says; refused with :class:`.wire.ONNXError`."""
    if len(data) == 0:
        raise ONNXError("the body is empty: send the .onnx file")
    reader = _Reader(data)
    opsets: dict[str, int] = {}
    producer = ["", ""]
    ir_version = 0
    graph: Graph | None = None
    for number, wire, a, b in fields(data, 0, len(data), reader.budget):
        if number == 1 and wire == VARINT:
            ir_version = a
        elif number in (2, 3) and wire == LEN:
            producer[number - 2] = text(data, a, b, 256)
        elif number == 8 and wire == LEN:
            parts = {n: (w, x, y) for n, w, x, y in fields(data, a, b, reader.budget)}
            domain = text(data, *parts[1][1:], 128) if 1 in parts and parts[1][0] == LEN else ""
            version = parts[2][1] if 2 in parts and parts[2][0] == VARINT else 0
            opsets["" if domain == "ai.onnx" else domain] = version
        elif number == 7 and wire == LEN:
            graph = reader.graph(a, b, 0)
    reader.budget.spend(0)  # what the walks' last batches left uncounted
    if graph is None:
        raise ONNXError("the file holds no graph: not an ONNX model")
    return Model(ir_version, producer[0], producer[1], opsets, graph, data)


def values(model: Model, tensor: Tensor, start: int, count: int) -> npt.NDArray[Any]:
    """Elements ``start … start + count − 1`` (row-major) of a tensor kept in the body, as the
    NumPy type of its data type (float16 and bfloat16 as their bits, uint16)."""
    data, kind = model.data, tensor.field
    lo, hi = tensor.span
    if kind is None:
        raise ONNXError(f"tensor {tensor.name!r} holds no values")
    if kind == "raw_data":
        size = ITEMSIZE.get(tensor.data_type)
        if size is None or (hi - lo) != size * tensor.size:
            raise ONNXError(
                f"tensor {tensor.name!r} holds {hi - lo} bytes of raw data for "
                f"{tensor.size} values of type {tensor.data_type}"
            )
        return np.frombuffer(data, _NUMPY[tensor.data_type], count, lo + size * start)
    if kind in ("float_data", "double_data"):
        size = 4 if kind == "float_data" else 8
        if (hi - lo) != size * tensor.size:
            raise ONNXError(
                f"tensor {tensor.name!r}: {kind} holds {(hi - lo) // size} values for {tensor.size}"
            )
        return np.frombuffer(data, "<f4" if size == 4 else "<f8", count, lo + size * start)
    if tensor.size > MAX_PACKED:
        # Varints are found by decoding them all: a cache so kept is read whole each time.
        raise ONNXError(
            f"tensor {tensor.name!r} keeps {tensor.size} values as {kind} (varints): "
            f"at most {MAX_PACKED} are read so; the builder writes raw_data"
        )
    if hi - lo > _LONGEST_VARINT * tensor.size:
        raise ONNXError(
            f"tensor {tensor.name!r}: {kind} holds {hi - lo} bytes, more than "
            f"{tensor.size} values take"
        )
    packed = packed_varints(data, lo, hi)
    if len(packed) != tensor.size:
        raise ONNXError(
            f"tensor {tensor.name!r}: {kind} holds {len(packed)} values for {tensor.size}"
        )
    chosen = packed[start : start + count]
    if tensor.data_type in (10, 16):  # float16 and bfloat16 bits in int32_data
        return chosen.astype(np.uint16)
    return chosen.astype(np.int64) if kind == "int64_data" else chosen.astype(np.int32)


_NUMPY = {
    1: "<f4",
    2: "u1",
    3: "i1",
    6: "<i4",
    7: "<i8",
    10: "<u2",
    11: "<f8",
    12: "<u4",
    13: "<u8",
    16: "<u2",
}
