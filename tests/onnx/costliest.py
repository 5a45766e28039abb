"""The bodies that cost ``POST /v1/rope/onnx`` most per byte, each at the reader's caps or
past a limit it refuses: what the declared cost is held to (tests/onnx/test_cost.py). Each
names what it presses on: the fields and nodes walked, the initializers kept, the widest cache
measured, packed lists decoded, If branches followed, rope nodes traced."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from posenc.declare import Part
from posenc.errors import PosencError
from posenc.schemes.rope.onnx import reader
from tests.onnx import graphs
from tests.onnx.files import rope_caches

# A body and the external parts sent with it (filename, bytes).
Body = tuple[bytes, list[tuple[str, bytes]]]
# A packed list of this many bytes: past the 1 MiB where the declared bytes reach their cap.
PACKED = 4 * 2**20


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def graph_of(raw: bytes) -> bytes:
    """A ModelProto whose graph (field 7) is ``raw``, with a producer."""
    return b"\x12\x01x" + field(7, raw)


def fields() -> Body:
    """The most fields a walk steps over, each an empty node (2 bytes)."""
    return graph_of(b"\x0a\x00" * (reader.MAX_FIELDS - 8)), []


def kept_nodes() -> Body:
    """The most nodes kept, each the smallest (an Identity, 11 bytes)."""
    kept = helper.make_node("Identity", ["a"], ["b"]).SerializeToString()
    return graph_of(field(1, kept) * reader.MAX_KEPT), []


def initializers() -> Body:
    """The most initializers kept, each its own name and nothing else (2 fields each: every
    one is kept, where one name given twice would be kept once)."""
    named = (field(5, field(8, b"t%d" % k)) for k in range(reader.MAX_INITIALIZERS))
    return graph_of(b"".join(named)), []


def packed_attribute() -> Body:
    """A Constant node whose attribute holds a packed list of 4 MiB of one-byte ints."""
    attribute = field(1, b"x") + field(8, b"\x01" * PACKED)
    return graph_of(field(1, field(4, b"Constant") + field(5, attribute))), []


def unpacked_attribute() -> Body:
    """A Constant node whose attribute holds as many ints as the walk steps over, each its
    own field (unpacked, 2 bytes)."""
    attribute = field(1, b"x") + b"\x40\x01" * (reader.MAX_FIELDS - 16)
    return graph_of(field(1, field(4, b"Constant") + field(5, attribute))), []


def packed_dims() -> Body:
    """An initializer whose dims are a packed list of 4 MiB."""
    tensor = field(1, b"\x01" * PACKED) + field(8, b"t") + bytes([2 << 3, 1])
    return graph_of(field(5, tensor)), []


def packed_threshold() -> Body:
    """LongRoPE's If, its threshold one int64 whose int64_data holds 4 MiB of varints."""
    made = graphs.longrope()
    int64 = bytes([2 << 3, TensorProto.INT64])
    threshold = field(8, b"original") + int64 + field(7, b"\x01" * PACKED)
    kept = [field(5, t.SerializeToString()) for t in made.graph.initializer if t.name != "original"]
    nodes = [field(1, node.SerializeToString()) for node in made.graph.node]
    return graph_of(b"".join([*nodes, *kept, field(5, threshold)])), []


def if_chain(count: int = 16) -> Body:
    """``count`` Ifs, each branch of one naming the next one's output: 2^count alternatives
    for the one cache a node reads, in 3 KB."""
    caches = rope_caches(16, 2, 1e4)
    names = [(f"cos_{k}", f"sin_{k}") for k in range(count)] + [("cos_cache", "sin_cache")]
    nodes = []
    for k in range(count):
        branches = [
            helper.make_graph(
                [],
                f"{side}{k}",
                [],
                [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names[k + 1]],
            )
            for side in ("then", "else")
        ]
        nodes.append(
            helper.make_node(
                "If", ["test"], list(names[k]), f"if{k}", then_branch=branches[0],
                else_branch=branches[1],
            )
        )  # fmt: skip
    nodes.append(graphs.attention(0, *names[0]))
    initializers = [numpy_helper.from_array(values, name) for name, values in caches.items()]
    return graphs.serialised(graphs.model(nodes, initializers, ("qkv", "test"))), []


def rope_nodes(chain: int = 0, count: int = reader.MAX_KEPT) -> Body:
    """``count`` RotaryEmbedding nodes (less the Ifs) reading one initializer's cache, or
    with ``chain`` the one of 2^chain alternatives :func:`if_chain` picks."""
    made = onnx.load_from_string(if_chain(chain)[0]) if chain else None
    cos, sin = ("cos_0", "sin_0") if chain else ("cos_cache", "sin_cache")
    node = helper.make_node(
        "RotaryEmbedding", ["x", "p", cos, sin], ["y"], domain="com.microsoft"
    ).SerializeToString()
    ifs = [n for n in made.graph.node if n.op_type == "If"] if made else []
    caches = rope_caches(16, 2, 1e4)
    initializers = b"".join(
        field(5, numpy_helper.from_array(values, name).SerializeToString())
        for name, values in caches.items()
    )
    branching = b"".join(field(1, n.SerializeToString()) for n in ifs)
    return graph_of(branching + field(1, node) * (count - len(ifs)) + initializers), []


def widest_cache() -> Body:
    """The widest cache the service reads (4096 pairs) over the longest context (2^31 − 1
    positions) as external data, and the parts that send its sampled rows: a rope of base
    10000 to fit."""
    from posenc.cli.budget import SERVICE_DEFAULTS
    from posenc.declare import Upload
    from posenc.schemes.rope.onnx import operation

    rows, pairs = 2**31 - 1, 4096
    made = graphs.plain()
    for k, tensor in enumerate(made.graph.initializer):
        external = onnx.TensorProto(name=tensor.name, data_type=onnx.TensorProto.FLOAT)
        external.dims.extend([rows, pairs])
        external.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (
            ("location", "data"),
            ("offset", k * rows * pairs * 4),
            ("length", rows * pairs * 4),
        ):
            external.external_data.add(key=key, value=str(value))
        made.graph.initializer[k].CopyFrom(external)
    body = graphs.serialised(made)
    with pytest.raises(PosencError) as refused:
        operation.handle(Upload(b"", {}, files={"model": (Part(body),)}), SERVICE_DEFAULTS)
    parts = []
    omega = 1e4 ** (-np.arange(pairs) / pairs)
    for need in getattr(refused.value, "needed", []):
        sin = need["tensor"] == "sin_cache"
        first = need["offset"] // (pairs * 4) - sin * rows
        angles = np.arange(first, first + need["length"] // (pairs * 4))[:, None] * omega
        values = (np.sin(angles) if sin else np.cos(angles)).astype(np.float32)
        parts.append((f"data@{need['offset']}", values.tobytes()))
    assert parts
    return body, parts


BODIES: dict[str, Callable[[], Body]] = {
    "fields": fields,
    "kept nodes": kept_nodes,
    "initializers": initializers,
    "an attribute's packed ints": packed_attribute,
    "an attribute's unpacked ints": unpacked_attribute,
    "a tensor's packed dims": packed_dims,
    "a threshold's packed int64_data": packed_threshold,
    "a chain of Ifs": if_chain,
    "rope nodes": rope_nodes,
    "rope nodes reading 64 alternatives each": lambda: rope_nodes(6),
    "as many reading 64 alternatives as are measured": lambda: rope_nodes(6, 6 + 512),
    "the widest cache": widest_cache,
}
