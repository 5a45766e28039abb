"""The bounded reader of an ONNX graph: it reads what the ``onnx`` package reads, follows If
branches at any depth up to its limit, refuses what a file claims beyond its bytes or the
service's limits with the service's own errors, and, fuzzed with mutated and truncated graphs,
raises nothing else (over HTTP: a 4xx, never a 5xx)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from posenc.cancel import CancelToken, WorkCancelledError, scope
from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.declare import Part, Upload
from posenc.errors import PosencError
from posenc.schemes.rope.onnx import graph, operation, reader, wire
from tests.conftest import Client
from tests.onnx import costliest, graphs
from tests.onnx.costliest import field, graph_of
from tests.onnx.files import multipart

PLAIN = graphs.serialised(graphs.plain())
LONGROPE = graphs.serialised(graphs.longrope())


def _handle(data: bytes) -> dict[str, object]:
    return operation.handle(Upload(b"", {}, files={"model": (Part(data),)}), SERVICE_DEFAULTS)


def test_the_reader_keeps_what_the_onnx_package_reads() -> None:
    made = graphs.longrope()
    model = reader.read(graphs.serialised(made))
    assert model.producer_name == "tests" and model.opsets == {"": 22, "com.microsoft": 1}
    (branching,) = [node for node in model.graph.nodes if node.op_type == "If"]
    (expected,) = [node for node in made.graph.node if node.op_type == "If"]
    for kept, branch in zip(branching.graphs.values(), expected.attribute, strict=True):
        for node, theirs in zip(kept.nodes, branch.g.node, strict=True):
            assert node.value is not None
            values = reader.values(model, node.value, 0, node.value.size)
            assert np.array_equal(values, numpy_helper.to_array(theirs.attribute[0].t).ravel())
    attention = [node for node in model.graph.nodes if node.op_type == "GroupQueryAttention"]
    assert [node.ints["do_rotary"] for node in attention] == [1, 1]
    assert attention[0].inputs[7:9] == ("cos_cache", "sin_cache")


def test_an_if_on_the_sequence_length_picks_long_factors_above_its_threshold() -> None:
    ropes = _handle(LONGROPE)["ropes"]
    assert isinstance(ropes, list)
    sides = {rope["cache_length"]: rope for rope in ropes}
    assert sides[256]["selected_by"][0]["test"] == "attention_mask.shape[1] > 64"
    assert sides[256]["sequence_lengths"] == [65, None]
    assert sides[64]["sequence_lengths"] == [1, 64]
    assert sides[256]["attention_factor"] == pytest.approx(1.2, rel=1e-6)


@pytest.mark.parametrize("depth", [2, reader.MAX_DEPTH])
def test_caches_nested_in_if_branches_are_found_at_any_depth_up_to_the_limit(depth: int) -> None:
    ropes = _handle(graphs.serialised(graphs.longrope(depth=depth)))["ropes"]
    assert isinstance(ropes, list)
    deepest = max(ropes, key=lambda rope: len(rope["selected_by"]))
    assert len(deepest["selected_by"]) == depth and deepest["cache_length"] == 256


def test_subgraphs_nested_beyond_the_limit_are_refused() -> None:
    with pytest.raises(wire.ONNXError, match="nest more than"):
        _handle(graphs.serialised(graphs.longrope(depth=reader.MAX_DEPTH + 1)))


def test_a_cache_among_as_many_alternatives_as_are_measured_is_read_and_past_them_refused() -> None:
    # Six Ifs, each branch naming the next If's outputs: 2^6 alternatives, each one rope.
    ropes = _handle(costliest.if_chain(6)[0])["ropes"]
    assert isinstance(ropes, list) and len(ropes) == graph.MAX_ROPES == 2**6
    assert {len(rope["selected_by"]) for rope in ropes} == {6}
    with pytest.raises(wire.GraphTooLargeError, match=f"more than {graph.MAX_ROPES} alternatives"):
        _handle(costliest.if_chain(7)[0])


def test_nodes_reading_caches_more_often_than_are_measured_are_refused_as_too_large() -> None:
    # 2^15 readings of 64 alternatives: nodes × alternatives past the bound.
    body, _ = costliest.rope_nodes(6, 6 + graph.MAX_USES // 64 + 1)
    with pytest.raises(wire.GraphTooLargeError, match=f"more than {graph.MAX_USES} times"):
        _handle(body)


def test_the_walk_of_the_graph_stops_at_a_checkpoint_once_its_work_is_not_wanted() -> None:
    model = reader.read(costliest.rope_nodes(count=4)[0])
    token = CancelToken()
    token.cancel()
    with scope(token), pytest.raises(WorkCancelledError):
        graph.uses(model, None)


def test_a_graph_of_more_fields_than_the_reader_walks_is_refused_as_too_large() -> None:
    empty_node = b"\x0a\x00"  # field 1 (node), 0 bytes
    body = graph_of(empty_node * (reader.MAX_FIELDS + 1))
    with pytest.raises(wire.GraphTooLargeError, match="fields"):
        _handle(body)


def test_more_kept_nodes_than_the_reader_keeps_are_refused_as_too_large() -> None:
    kept = helper.make_node("Identity", ["a"], ["b"]).SerializeToString()
    node = field(1, kept)
    with pytest.raises(wire.GraphTooLargeError, match="nodes of interest"):
        _handle(graph_of(node * (reader.MAX_KEPT + 1)))


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        (b"\x3a\xff\xff\xff\x0f", "claims"),  # a graph of 4 GiB in a body of 5 bytes
        (b"\x3a", "cut off"),
        (b"\x3b\x00", "wire type 3"),
        (b"\x08" + b"\xff" * 11, "varint"),
        (b"", "empty"),
        (b"\x12\x01x", "no graph"),
    ],
)
def test_what_a_file_claims_is_held_to_its_bytes(claim: bytes, message: str) -> None:
    with pytest.raises(wire.ONNXError, match=message):
        _handle(claim)


def _with_cache(dims: list[int], data_type: int = onnx.TensorProto.FLOAT, **where: str) -> bytes:
    made = graphs.plain()
    for tensor in made.graph.initializer:
        del tensor.dims[:]
        tensor.dims.extend(dims)
        tensor.data_type = data_type
        if where:
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in where.items():
                tensor.external_data.add(key=key, value=value)
    return graphs.serialised(made)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_with_cache([256, 8, 1]), "shape"),
        (_with_cache([1, 8]), "2 rows or more"),
        (_with_cache([256, 4097], location="d", offset="0", length="1"), "at most 4096"),
        (_with_cache([256, 8], location="d", offset="0", length="12"), "claims 12 bytes"),
        (_with_cache([256, 8], location="d\0x", offset="0", length="8192"), "location"),
        (_with_cache([256, 8], location="d", offset="-1", length="8192"), "offset"),
        (_with_cache([256, 8], onnx.TensorProto.INT64), "not a float type"),
        (_with_cache([128, 8]), "raw data"),
    ],
)
def test_a_cache_a_file_describes_wrongly_is_refused_naming_it(body: bytes, message: str) -> None:
    with pytest.raises(wire.ONNXError, match=message):
        _handle(body)


def _mutated(data: bytes, cut: int, flips: list[tuple[int, int]], insert: bytes) -> bytes:
    mutable = bytearray(data[: max(cut, 0)] if cut else data)
    for at, value in flips:
        if mutable:
            mutable[at % len(mutable)] = value
    if insert and mutable:
        at = flips[0][0] % len(mutable) if flips else 0
        mutable[at:at] = insert
    return bytes(mutable)


_MUTATIONS = st.tuples(
    st.sampled_from([PLAIN, LONGROPE]),
    st.integers(0, len(LONGROPE)),
    st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), max_size=6),
    st.binary(max_size=12),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_MUTATIONS)
def test_a_mutated_or_truncated_graph_raises_only_the_services_own_errors(
    mutation: tuple[bytes, int, list[tuple[int, int]], bytes],
) -> None:
    data = _mutated(*mutation)
    try:
        _handle(data)
    except PosencError:
        pass


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_MUTATIONS)
def test_a_mutated_graph_sent_over_http_is_answered_or_refused_with_a_4xx(
    mutation: tuple[bytes, int, list[tuple[int, int]], bytes],
) -> None:
    body, headers = multipart([("model", "model.onnx", _mutated(*mutation))])
    response = Client().post("/v1/rope/onnx", content=body, headers=headers)
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text


def test_a_float16_cache_kept_as_int32_data_is_read_as_its_bits() -> None:
    made = graphs.plain()
    for k, tensor in enumerate(made.graph.initializer):
        values = numpy_helper.to_array(tensor).astype(np.float16)
        # Not raw: onnx keeps float16 values as their bits in int32_data.
        halves = helper.make_tensor(tensor.name, onnx.TensorProto.FLOAT16, values.shape, values)
        assert not halves.raw_data and halves.int32_data
        made.graph.initializer[k].CopyFrom(halves)
    ropes = _handle(graphs.serialised(made))["ropes"]
    assert isinstance(ropes, list) and len(ropes) == 1
    assert ropes[0]["dtype"] == "float16" and ropes[0]["params"]["base"] == 10000.0


def test_the_external_data_offset_and_length_are_integers_the_file_states() -> None:
    body = _with_cache([256, 8], location="d", offset="1e3", length="8192")
    with pytest.raises(wire.ONNXError, match="offset"):
        _handle(body)


def test_a_cache_kept_as_more_varints_than_the_reader_decodes_is_refused() -> None:
    made = graphs.plain()
    rows = reader.MAX_PACKED // 8 + 1
    for k, tensor in enumerate(made.graph.initializer):
        halves = np.ones((rows, 8), np.float16)
        kept = helper.make_tensor(tensor.name, onnx.TensorProto.FLOAT16, halves.shape, halves)
        made.graph.initializer[k].CopyFrom(kept)
    with pytest.raises(wire.ONNXError, match="varints"):
        _handle(graphs.serialised(made))


@pytest.mark.parametrize("packed", [True, False])
def test_a_tensor_of_more_dimensions_than_the_reader_keeps_is_refused(packed: bool) -> None:
    dims = [1] * (reader.MAX_DIMS + 1)
    listed = field(1, bytes(dims)) if packed else b"".join(bytes([1 << 3, d]) for d in dims)
    with pytest.raises(wire.ONNXError, match=f"more than {reader.MAX_DIMS} dimensions"):
        reader.read(graph_of(field(5, listed + field(8, b"t"))))
