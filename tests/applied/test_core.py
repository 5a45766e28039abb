"""The analyser of POST /v1/rope/applied on arrays whose rotation is known to the last bit: the
exact rope (posenc's own, float64) applied to random vectors and rounded once to the dtype, as a
correctly rounding kernel would — with the expected rope from the query or a model's config, in
every layout of axes, and the faults the structure shows (pairs, dimensions, positions)."""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from posenc.declare import Part
from posenc.errors import InconsistentError, ParameterError
from posenc.numerics.bfloat16 import rounded as bfloat16_rounded
from posenc.schemes.rope import maths
from posenc.schemes.rope.applied import reader
from posenc.schemes.rope.applied.angles import held_in
from posenc.schemes.rope.params import RopeParams
from tests.applied.dumps import Dump, analyse, names, npy
from tests.hub_configs import HUB_CONFIGS, llama_4_rope_scaling

Array = npt.NDArray[Any]
FAR = np.arange(1_000_000, 1_000_048)


def exact(
    params: RopeParams,
    x: Array,
    positions: npt.NDArray[np.int64],
    dtype: str = "float32",
    rotary_offset: int = 0,
    sign: float = 1.0,
    table: str | None = None,
) -> Array:
    """``x`` ``(n, samples, head)`` turned by the exact rope at its dims and rounded once
    (``table``: by its cos and sin rounded to that type first)."""
    cos, sin = maths.encode(params, positions, "float64", "cos_sin")
    if table is not None:
        cos, sin = cos.astype(table).astype(np.float64), sin.astype(table).astype(np.float64)
    turned = x.astype(np.float64)
    block = slice(rotary_offset, rotary_offset + params.d_model)
    turned[..., block] = maths.rotate_with(
        params.layout, turned[..., block], cos[:, None], sign * sin[:, None]
    )
    return turned.astype(dtype)


def vectors(n: int, samples: int, head: int, dtype: str = "float32", seed: int = 0) -> Array:
    return np.random.default_rng(seed).standard_normal((n, samples, head)).astype(dtype)


def bfloat16(values: Array) -> npt.NDArray[np.uint16]:
    """float64 values rounded to bfloat16 (ties to even), as the words a raw part holds."""
    words = values.astype(np.float32).view(np.uint32)
    rounded = (words + np.uint32(0x7FFF) + ((words >> np.uint32(16)) & np.uint32(1))) >> np.uint32(
        16
    )
    return rounded.astype(np.uint16)


# --- the reader ------------------------------------------------------------------------------


def test_a_npy_header_claiming_2_to_the_40_values_is_refused_from_its_header() -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }"
    body = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    with pytest.raises(InconsistentError, match=r"needs 4398046511104 bytes, the part has 0"):
        reader.read(Part(body), "before", reader.FLOATS)


def test_a_fortran_ordered_npy_is_read_as_numpy_reads_it() -> None:
    values = np.asfortranarray(vectors(3, 2, 4))
    given = reader.read(Part(npy(values)), "before", reader.FLOATS)
    assert np.array_equal(given.values, values) and given.dtype == "float32"


def test_bfloat16_is_read_raw_with_part_headers_or_as_two_byte_void_npy() -> None:
    words = bfloat16(np.linspace(-2, 2, 12)).reshape(3, 4)
    headers = {"x-array-shape": "3,4", "x-array-dtype": "bfloat16"}
    raw = reader.read(Part(words.tobytes(), headers), "after", reader.FLOATS)
    void = reader.read(Part(npy(words.view("V2"))), "after", reader.FLOATS)
    assert raw.dtype == void.dtype == "bfloat16"
    assert np.array_equal(raw.values, words) and np.array_equal(void.values, words)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_of_each_version_numpy_writes_is_read(version: tuple[int, int]) -> None:
    values = vectors(3, 2, 4)
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, values, version=version)
    given = reader.read(Part(buffer.getvalue()), "before", reader.FLOATS)
    assert np.array_equal(given.values, values) and given.dtype == "float32"


def _npy_header(text: str, major: int = 1) -> bytes:
    width = 2 if major == 1 else 4
    return b"\x93NUMPY" + bytes([major, 0]) + len(text).to_bytes(width, "little") + text.encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_npy_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2)}"), "got >f4"),
        (_npy_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 2)}"),
         "dtype must be one of"),
        (_npy_header("{'descr': ('<V2', (2,)), 'fortran_order': False, 'shape': (2, 2)}"),
         "dtype must be one of"),
        (_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4)}"),
         "not a valid .npy file: shape [-1, 4]"),
        (_npy_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 2)}"),
         "not a valid .npy file"),
        (_npy_header("(" * 5000 + ")" * 5000), "not a valid .npy file"),
        (_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)}", 9),
         "version 9.0 is not read here"),
        (b"\x93NUMPY\x01", "not a valid .npy file"),
    ],
    ids=["big-endian", "structured", "subarray", "negative size", "fortran_order not a bool",
         "nested", "version 9", "cut in its magic"],
)  # fmt: skip
def test_npy_headers_numpy_would_not_read_as_floats_are_refused_naming_the_part(
    body: bytes, message: str
) -> None:
    with pytest.raises(ParameterError, match=re.escape(message)) as refused:
        reader.read(Part(body + bytes(64)), "after", reader.FLOATS)
    assert refused.value.param == "after"


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "neither .npy nor raw bytes"),
        ({"x-array-shape": "3,0", "x-array-dtype": "float32"}, "X-Array-Shape"),
        ({"x-array-shape": "1,1,1,1,1,1,1", "x-array-dtype": "float32"}, "X-Array-Shape"),
        ({"x-array-shape": "3,4", "x-array-dtype": "int8"}, "dtype must be one of"),
        ({"x-array-shape": "3,5", "x-array-dtype": "float32"}, "needs 60 bytes, the part has 48"),
    ],
)
def test_raw_parts_say_what_they_hold_or_are_refused(headers: dict[str, str], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        reader.read(Part(bytes(48), headers), "before", reader.FLOATS)


def test_positions_must_number_the_token_axis_and_stay_in_range() -> None:
    with pytest.raises(InconsistentError, match=r"shape \(4,\) or \(3, 4\)"):
        reader.positions(np.arange(5), 4, 0)
    with pytest.raises(ParameterError, match=r"got -3 at index \[2\]"):
        reader.positions(np.array([0, 1, -3, 4]), 4, 0)
    assert reader.positions(None, 3, 7).tolist() == [7, 8, 9]
    assert reader.positions(np.arange(3), 3, 2**31 - 1).tolist() == [0, 1, 2]  # offset unread


# --- what holds ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_a_correctly_rounding_kernel_holds_as_exact_in_every_dtype(dtype: str) -> None:
    params = RopeParams(d_model=32, base=500000.0)
    x = vectors(48, 4, 32, dtype)
    positions = FAR if dtype != "float16" else np.arange(4000, 4048)
    dump = Dump(x, exact(params, x, positions, dtype), 0, positions)
    answer = analyse(dump, d_model=32, base=500000.0)
    assert answer["holds"] is True, answer["diagnosis"]
    assert answer["measured"]["recipe"] == "exact"
    eps = float(np.finfo(dtype).eps)
    assert eps / 2 < answer["measured"]["resolution"] < 8 * eps  # the dtype's own


def test_bfloat16_arrays_hold_to_bfloat16s_resolution() -> None:
    params = RopeParams(d_model=32)
    x = bfloat16(vectors(48, 4, 32, "float64"))
    given = (x.astype(np.uint32) << 16).view(np.float32)
    after = bfloat16(exact(params, given, FAR, "float64"))
    answer = analyse(Dump(x, after, 0, FAR, "bfloat16"), d_model=32)
    assert answer["holds"] is True and answer["measured"]["dtypes"]["after"] == "bfloat16"
    assert answer["measured"]["resolution"] > 2**-8


def test_axes_heads_and_batches_are_samples_of_the_token_axis() -> None:
    params = RopeParams(d_model=16)
    x = vectors(48, 6, 16)  # tokens, heads, head
    y = exact(params, x, FAR)
    # As (batch 2, tokens, heads 3 × head 16): the token axis 1, head_dim splitting the last.
    before = x.reshape(48, 2, 3 * 16).transpose(1, 0, 2).copy()
    after = y.reshape(48, 2, 3 * 16).transpose(1, 0, 2).copy()
    answer = analyse(Dump(before, after, 1, FAR), d_model=16, head_dim=16)
    assert answer["holds"] is True
    assert answer["measured"]["samples"] == 6 and answer["measured"]["tokens"] == 48


def test_a_rope_over_the_trailing_dims_of_a_head_holds_there() -> None:
    params = RopeParams(d_model=16, layout="interleaved")
    x = vectors(48, 2, 48)
    dump = Dump(x, exact(params, x, FAR, rotary_offset=32), 0, FAR)
    answer = analyse(dump, d_model=16, layout="interleaved", rotary_offset=32)
    assert answer["holds"] is True and answer["measured"]["rotated_dims"] == [32, 48]
    moved = analyse(dump, d_model=16, layout="interleaved")  # the rope stated at dims 0 … 15
    assert moved["holds"] is False and "partial_rotary" in names(moved)


def test_zero_vectors_leave_the_verdict_open() -> None:
    zeros = np.zeros((8, 2, 16), np.float32)
    answer = analyse(Dump(zeros, zeros, 0), d_model=16)
    assert answer["holds"] is None and "no nonzero pair" in answer["reason"]


def test_position_zero_alone_cannot_tell_a_rope_from_none() -> None:
    x = vectors(4, 2, 16)
    answer = analyse(Dump(x, x.copy(), 0, np.zeros(4, np.int64)), d_model=16)
    assert answer["holds"] is None and "tell the rope from no rope" in answer["reason"]


# --- a model's config -----------------------------------------------------------------------


LLAMA4 = {
    "model_type": "llama4_text",
    "hidden_size": 512,
    "num_attention_heads": 4,
    "head_dim": 128,
    "num_hidden_layers": 8,
    "max_position_embeddings": 262144,
    "rope_theta": 500000.0,
    "rope_scaling": llama_4_rope_scaling(),
}


def test_a_config_names_each_layers_rope_and_its_nope_layers() -> None:
    params = RopeParams(
        d_model=128, base=500000.0, layout="interleaved", scaling="llama3", **_llama4_scaling()
    )
    x = vectors(48, 2, 128)
    turned = Dump(x, exact(params, x, FAR), 0, FAR)
    assert analyse(turned, LLAMA4, layer=2)["holds"] is True
    nope = analyse(turned, LLAMA4, layer=3)  # every fourth layer of Llama 4 has no rope
    assert nope["holds"] is False and names(nope) == ["partial_rotary"]
    assert nope["expected"]["params"] is None
    assert analyse(Dump(x, x.copy(), 0, FAR), LLAMA4, layer=3)["holds"] is True


def _llama4_scaling() -> dict[str, Any]:
    scaling = llama_4_rope_scaling()
    return {k: scaling[k] for k in scaling if k != "rope_type"}


def test_gemma3s_sliding_base_in_a_full_layer_is_a_base_mismatch() -> None:
    config = HUB_CONFIGS["gemma3_text 1B"]
    sliding = RopeParams(d_model=256, base=10000.0)
    x = vectors(48, 1, 256)
    dump = Dump(x, exact(sliding, x, np.arange(8192, 8240)), 0, np.arange(8192, 8240))
    assert analyse(dump, config, layer=0)["holds"] is True
    answer = analyse(dump, config, layer=5)  # a full layer: base 10^6
    assert names(answer) == ["base_mismatch"]
    assert answer["diagnosis"][0]["evidence"]["fitted_base"] == 10000.0


def test_deepseeks_interleaved_q_written_as_rotate_half_holds_as_its_apply() -> None:
    config = HUB_CONFIGS["deepseek_v3"]
    from posenc.schemes.rope.applied.expected import from_config

    params = from_config(config, {}).params
    assert params is not None
    x = vectors(48, 2, 64)
    interleaved = x.reshape(48, 2, 32, 2).transpose(0, 1, 3, 2).reshape(48, 2, 64)
    after = exact(params, interleaved, FAR)  # pairs (2i, 2i+1) turned into (i, i + 32)
    answer = analyse(Dump(x, after, 0, FAR), config)
    assert answer["holds"] is True, answer["diagnosis"]
    assert answer["measured"]["pairs"] == "interleaved_to_rotate_half"


def test_nanochats_reversed_pairs_hold_and_a_forward_turn_is_named() -> None:
    config = {
        "model_type": "nanochat",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 2048,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    params = RopeParams(d_model=64)
    x = vectors(48, 2, 64)
    backwards = Dump(x, exact(params, x, FAR, sign=-1.0), 0, FAR)
    assert analyse(backwards, config)["holds"] is True
    forwards = analyse(Dump(x, exact(params, x, FAR), 0, FAR), config)
    assert names(forwards) == ["reversed_rotation"]


def test_positions_held_in_bfloat16_are_named() -> None:
    params = RopeParams(d_model=32)
    positions = np.arange(3000, 3048)
    x = vectors(48, 2, 32)
    dump = Dump(x, exact(params, x, held_in(positions[None], "bfloat16")[0]), 0, positions)
    answer = analyse(dump, d_model=32)
    assert names(answer) == ["collapsed_positions"]
    assert answer["diagnosis"][0]["evidence"]["positions_dtype"] == "bfloat16"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_float16_table_turning_wider_data_is_named_and_read_to_its_resolution(dtype: str) -> None:
    params = RopeParams(d_model=64, base=500000.0)
    x, positions = vectors(256, 4, 64, dtype), np.arange(5000, 5256)
    after = exact(params, x, positions, dtype, table="float16")
    found = analyse(Dump(x, after, 0, positions), d_model=64, base=500000.0)
    assert found["holds"] is False and names(found) == ["table_precision"]
    assert found["diagnosis"][0]["evidence"]["table_dtype"] == "float16"
    assert found["measured"]["recipe"] == "exact"
    assert 2.0**-9 <= found["measured"]["resolution"] < 2.0**-8  # float16's, not the data's
    # The same table turning the data in float16: float16's own rounding, so it holds.
    narrowed = Dump(x.astype(np.float16), after.astype(np.float16), 0, positions)
    narrow = analyse(narrowed, d_model=64, base=500000.0)
    assert narrow["holds"] is True and names(narrow) == []


def test_a_bfloat16_table_turning_float32_data_is_named_under_the_pairing_it_turned() -> None:
    params = RopeParams(d_model=64, layout="interleaved")
    x, positions = vectors(48, 2, 64), np.arange(70000, 70048)
    cos, sin = maths.encode(params, positions, "float32", "cos_sin")
    cos, sin = bfloat16_rounded(cos).astype(np.float64), bfloat16_rounded(sin).astype(np.float64)
    after = maths.rotate_with("interleaved", x.astype(np.float64), cos[:, None], sin[:, None])
    found = analyse(Dump(x, after.astype(np.float32), 0, positions), d_model=64)  # split stated
    assert names(found) == ["table_precision", "pairing_mismatch"], found["diagnosis"]
    assert found["diagnosis"][0]["evidence"]["table_dtype"] == "bfloat16"


def test_a_kernel_that_only_scales_by_bfloat16_values_is_no_table() -> None:
    # b is 0 in every cell and a is a bfloat16 value: on the grid, yet no rotation at all.
    x, positions = vectors(64, 4, 64), np.arange(100, 164)
    scale = 1 + np.random.default_rng(2).uniform(-0.01, 0.01, (64, 1, 1))
    after = (x * bfloat16_rounded(scale)).astype(np.float32)
    assert names(analyse(Dump(x, after, 0, positions), d_model=64)) == ["not_a_rotation"]


def test_a_float32_table_turning_float64_data_is_named_float32() -> None:
    params = RopeParams(d_model=64)
    x, positions = vectors(64, 4, 64, "float64"), np.arange(64)
    after = exact(params, x, positions, "float64", table="float32")
    found = analyse(Dump(x, after, 0, positions), d_model=64)
    assert names(found) == ["table_precision"]
    assert found["diagnosis"][0]["evidence"]["table_dtype"] == "float32"


def test_a_narrower_rope_than_the_models_is_a_partial_rotary() -> None:
    x = vectors(48, 2, 64)
    narrow = exact(RopeParams(d_model=32), x, FAR)  # dims 0 … 31 turned, in pairs (i, i + 16)
    answer = analyse(Dump(x, narrow, 0, FAR), d_model=64)
    assert answer["holds"] is False and names(answer) == ["partial_rotary"]
    assert answer["measured"]["rotated_dims"] == [0, 32]
    assert answer["diagnosis"][0]["evidence"]["measured_dims"] == [0, 32]


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "query", "param"),
    [
        (None, {}, "d_model"),
        (None, {"d_model": 16, "layer": 2}, "layer"),
        (LLAMA4, {"layer": 8}, "layer"),
        (LLAMA4, {"base": 10000.0}, "base"),
        (None, {"d_model": 64}, "d_model"),  # past a head of 16
        (None, {"d_model": 16, "token_axis": 2}, "token_axis"),
        (None, {"d_model": 16, "head_dim": 5}, "head_dim"),
    ],
)
def test_what_cannot_be_answered_is_refused_naming_its_parameter(
    config: Any, query: dict[str, Any], param: str
) -> None:
    x = vectors(4, 2, 16)
    with pytest.raises(ParameterError) as refused:
        analyse(Dump(x, x.copy(), 0), config, **query)
    assert refused.value.param == param


def test_shapes_that_differ_and_non_finite_values_are_refused_naming_the_part() -> None:
    x = vectors(4, 2, 16)
    with pytest.raises(InconsistentError) as refused:
        analyse(Dump(x, x[:3].copy(), 0), d_model=16)
    assert refused.value.param == "after"
    y = x.copy()
    y[2, 1, 5] = np.nan
    with pytest.raises(ParameterError, match=r"NaN or infinity, first at index \[2, 1, 5\]"):
        analyse(Dump(x, y, 0), d_model=16)


def test_three_rows_of_ids_need_a_multimodal_config() -> None:
    x = vectors(4, 2, 16)
    ids = np.stack([np.arange(4)] * 3)
    with pytest.raises(InconsistentError, match="M-RoPE"):
        analyse(Dump(x, x.copy(), 0, ids), d_model=16)


def test_npy_bytes_round_trip_helper_writes_version_one() -> None:
    assert io.BytesIO(npy(np.zeros(2, np.float32))).read(8) == b"\x93NUMPY\x01\x00"


# --- the answer as the document says it -------------------------------------------------------
# analyse() holds every answer to the OpenAPI document; these make the findings and members the
# other tests do not.


def _wider_exponent(x: Array, d_model: int, positions: npt.NDArray[np.int64]) -> Array:
    """The first ``d_model`` dimensions of ``x``'s heads turned (split) by the frequencies of
    the whole head: base^(−2i/head), as a kernel whose exponent runs over the whole head."""
    head = x.shape[-1]
    cos, sin = maths.encode(RopeParams(d_model=head), positions, "float64", "cos_sin")
    half = d_model // 2
    c, s = cos[:, None, :half], sin[:, None, :half]
    turned = x.astype(np.float64)
    a, b = turned[..., :half].copy(), turned[..., half:d_model].copy()
    turned[..., :half], turned[..., half:d_model] = a * c - b * s, b * c + a * s
    return turned.astype(x.dtype)


def _made(case: str) -> tuple[dict[str, Any], list[str]]:
    """The answer for one kernel fault, and the findings it names."""
    params, x, positions = RopeParams(d_model=64), vectors(512, 4, 64), np.arange(512)
    turned = exact(params, x, positions)
    if case == "unrelated output":
        return analyse(Dump(x, vectors(512, 4, 64, seed=5), 0), d_model=64), ["not_a_rotation"]
    if case == "seven tokens scaled":
        turned[1:8] *= 2  # between the tokens the pairing is read on
        return analyse(Dump(x, turned, 0), d_model=64), ["not_a_rotation"]
    if case == "positions of no order":
        wrong = np.random.default_rng(1).integers(0, 2**20, 512)
        return analyse(Dump(x, exact(params, x, wrong), 0), d_model=64), ["angles_mismatch"]
    if case == "every other position repeated":
        halved = exact(params, x, positions // 2)
        return analyse(Dump(x, halved, 0), d_model=64), ["collapsed_positions"]
    if case == "the exponent over the whole head":
        wide = vectors(512, 4, 128)
        answer = analyse(Dump(wide, _wider_exponent(wide, 64, positions), 0), d_model=64)
        return answer, ["partial_rotary"]
    dynamic = {"scaling": "dynamic", "factor": 2.0, "original_max_position_embeddings": 256}
    scaled = exact(RopeParams(d_model=64, **dynamic), x, positions)  # type: ignore[arg-type]
    return analyse(Dump(x, scaled, 0), d_model=64, **dynamic), []


@pytest.mark.parametrize(
    "case",
    [
        "unrelated output",
        "seven tokens scaled",
        "positions of no order",
        "every other position repeated",
        "the exponent over the whole head",
        "dynamic scaling, which llama.cpp has not",
    ],
)
def test_each_fault_names_its_finding_in_an_answer_the_document_describes(case: str) -> None:
    answer, found = _made(case)
    assert names(answer) == found
    assert answer["holds"] is (False if found else True)
    if case == "dynamic scaling, which llama.cpp has not":
        assert answer["measured"]["recipes"]["ggml"]["holds"] is None
        assert "dynamic" in answer["measured"]["recipes"]["ggml"]["reason"]
