from __future__ import annotations

import struct
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.schemes.rope.gguf import reader
from posenc.schemes.rope.gguf.reader import GGUFError, PrefixTooShortError
from tests.gguf.files import ARRAY, STRING, array, gguf, kv, string

LLAMA = {
    "general.architecture": "llama",
    "general.name": "tiny",
    "llama.context_length": 131072,
    "llama.block_count": 2,
    "llama.rope.freq_base": 500000.0,
    "tokenizer.ggml.tokens": ["a", "b", "<s>"],
    "tokenizer.ggml.scores": [0.0, 1.0, 2.0],
}
FREQS = np.arange(1, 5, dtype=np.float32)


def test_values_a_rope_reads_are_kept_with_their_types() -> None:
    header = reader.read(gguf(LLAMA))
    assert header.architecture == "llama"
    assert header.values["llama.context_length"] == 131072
    assert header.values["llama.rope.freq_base"] == 500000.0
    assert header.version == 3 and header.kv_count == len(LLAMA)


def test_a_vocabulary_and_names_are_stepped_over_not_kept() -> None:
    header = reader.read(gguf(LLAMA))
    assert "tokenizer.ggml.tokens" not in header.values
    assert "tokenizer.ggml.scores" not in header.values
    assert "general.name" not in header.values


def test_version_2_is_read_and_1_refused() -> None:
    assert reader.read(gguf(LLAMA, version=2)).version == 2
    with pytest.raises(GGUFError, match="version 1"):
        reader.read(gguf(LLAMA, version=1))


def test_the_magic_is_checked() -> None:
    with pytest.raises(GGUFError, match="not GGUF's magic"):
        reader.read(b"GGML" + gguf(LLAMA)[4:])


def test_rope_tensors_are_read_from_the_aligned_data_section() -> None:
    short = np.linspace(1, 2, 4, dtype=np.float32)
    file = gguf(
        LLAMA,
        [("rope_freqs.weight", FREQS), ("rope_factors_short.weight", short),
         ("token_embd.weight", np.zeros(7, np.float32))],
    )  # fmt: skip
    header = reader.read(file)
    assert header.data_start % 32 == 0
    np.testing.assert_array_equal(header.rope_tensors["rope_freqs.weight"], FREQS)
    np.testing.assert_array_equal(header.rope_tensors["rope_factors_short.weight"], short)
    assert header.tensor_count == 3 and "token_embd.weight" not in header.tensors
    assert not header.rope_tensors["rope_freqs.weight"].flags.writeable


def test_f16_factors_are_read_as_float32() -> None:
    half = np.array([1.0, 1.5, 8.0, 0.25], np.float16)
    header = reader.read(gguf(LLAMA, [("rope_freqs.weight", half)]))
    tensor = header.rope_tensors["rope_freqs.weight"]
    assert tensor.dtype == np.float32
    np.testing.assert_array_equal(tensor, half.astype(np.float32))


def test_another_alignment_moves_the_data() -> None:
    values = {**LLAMA, "general.alignment": 64}
    header = reader.read(gguf(values, [("rope_freqs.weight", FREQS)], alignment=64))
    assert header.alignment == 64 and header.data_start % 64 == 0
    np.testing.assert_array_equal(header.rope_tensors["rope_freqs.weight"], FREQS)


def test_an_alignment_not_a_power_of_two_is_refused() -> None:
    with pytest.raises(GGUFError, match="not a power of two"):
        reader.read(gguf({**LLAMA, "general.alignment": 48}))


def test_a_prefix_ending_in_the_header_names_the_bytes_to_send() -> None:
    file = gguf(LLAMA)
    cut = len(file) // 2
    with pytest.raises(PrefixTooShortError, match="send at least the first") as caught:
        reader.read(file[:cut])
    assert cut < caught.value.needed_bytes <= len(file)


def test_a_rope_tensor_beyond_the_prefix_names_its_byte_range() -> None:
    file = gguf(LLAMA, [("rope_freqs.weight", FREQS)])
    header = reader.read(file)
    with pytest.raises(PrefixTooShortError, match=r"rope_freqs\.weight") as caught:
        reader.read(file[: header.data_start + 4])
    assert caught.value.needed_bytes == header.data_start + FREQS.nbytes
    assert f"{header.data_start}–{header.data_start + FREQS.nbytes - 1}" in str(caught.value)


def test_the_header_alone_is_enough_without_rope_tensors() -> None:
    file = gguf(LLAMA, [("token_embd.weight", np.zeros(64, np.float32))])
    header = reader.read(file[: reader.read(file).data_start])
    assert header.rope_tensors == {}


HOSTILE = [
    # (what the file claims, the message that names it)
    (array("x.rope.huge", 4, [])[:-8] + struct.pack("<Q", 2**60), "1152921504606846976 values"),
    (string("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 2**60), "strings"),
    (string("general.name") + struct.pack("<IQ", STRING, 2**62) + b"tiny", "bytes long"),
    (string("llama.rope.freq_base") + struct.pack("<I", 13) + b"\0" * 8, "value type 13"),
    (string("llama.rope.x") + struct.pack("<IIQ", ARRAY, ARRAY, 1), "array of arrays"),
    (string("llama.rope.x") + struct.pack("<IIQ", ARRAY, 99, 1), "array of type 99"),
    (struct.pack("<Q", 2**63) + b"key", "key 1"),
]


@pytest.mark.parametrize(("claim", "message"), HOSTILE, ids=[m for _, m in HOSTILE])
def test_a_hostile_claim_is_refused_quickly_and_named(claim: bytes, message: str) -> None:
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv("general.architecture", STRING, "llama")
    body = head + claim + b"\0" * 64
    start = time.perf_counter()
    with pytest.raises(GGUFError, match=message):
        reader.read(body, limit=64 * 2**20)
    assert time.perf_counter() - start < 0.05


def test_claimed_counts_beyond_any_prefix_are_refused_before_reading() -> None:
    body = b"GGUF" + struct.pack("<IQQ", 3, 2**40, 2**40)
    with pytest.raises(GGUFError, match="key/values and") as caught:
        reader.read(body, limit=64 * 2**20)
    assert not isinstance(caught.value, PrefixTooShortError)


def test_a_tensor_with_too_many_dimensions_is_refused() -> None:
    info = string("t") + struct.pack("<I", 9) + b"\0" * 200
    body = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + info
    with pytest.raises(GGUFError, match="9 dimensions"):
        reader.read(body)


def test_a_rope_tensor_of_another_type_is_refused() -> None:
    info = string("rope_freqs.weight") + struct.pack("<IQIQ", 1, 4, 8, 0)
    body = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + info
    with pytest.raises(GGUFError, match="ggml type 8"):
        reader.read(body + b"\0" * 64)


def test_a_duplicated_key_is_refused() -> None:
    twice = kv("llama.block_count", 4, 1) + kv("llama.block_count", 4, 2)
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + twice
    with pytest.raises(GGUFError, match="twice"):
        reader.read(body)


def test_a_file_of_more_rope_keys_than_any_model_has_is_refused() -> None:
    keys = b"".join(kv(f"llama.rope.k{i}", 4, i) for i in range(300))
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 300) + keys
    with pytest.raises(GGUFError, match="more than 256 keys"):
        reader.read(body)


def test_a_rope_tensor_claiming_more_factors_than_any_rope_is_refused() -> None:
    info = string("rope_freqs.weight") + struct.pack("<IQIQ", 1, 2**40, 0, 0)
    body = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + info
    with pytest.raises(GGUFError, match="1099511627776 factors"):
        reader.read(body + b"\0" * 64)


def test_a_256k_vocabulary_in_a_64_mib_prefix_is_read_in_well_under_a_second() -> None:
    tokens = [f"token{i:06d}" for i in range(256_000)]
    merges = [f"tok{i} en{i}" for i in range(256_000)]
    file = gguf({**LLAMA, "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges})
    file += b"\0" * (64 * 2**20 - len(file))
    start = time.perf_counter()
    header = reader.read(file)
    elapsed = time.perf_counter() - start
    assert header.values["llama.rope.freq_base"] == 500000.0
    assert elapsed < 1.0, elapsed


def test_the_slowest_bodies_of_64_mib_are_read_in_well_under_a_second() -> None:
    # Nothing but empty strings, and nothing but the smallest tensor infos: the most items a
    # prefix can hold, each stepped over by a compiled loop.
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv("general.architecture", STRING, "llama")
    count = (64 * 2**20 - 200) // 8
    strings = head + string("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, count)
    info = string("t") + struct.pack("<IQIQ", 1, 4, 0, 0)
    infos = (64 * 2**20 - 100) // len(info)
    tensors = b"GGUF" + struct.pack("<IQQ", 3, infos, 1) + kv("general.architecture", STRING, "x")
    for body in (strings + bytes(8 * count), tensors + info * infos):
        reader.read(body)  # compiled once, outside the measurement
        start = time.perf_counter()
        reader.read(body)
        assert time.perf_counter() - start < 0.5


def test_rope_tensor_infos_are_found_among_the_others() -> None:
    freqs = np.ones(8, np.float32)
    others = [(f"blk.{i}.attn_q.weight", np.zeros(4, np.float32)) for i in range(20)]
    file = gguf(LLAMA, [*others, ("rope_freqs.weight", freqs), ("token_embd.weight", freqs)])
    header = reader.read(file)
    assert list(header.tensors) == ["rope_freqs.weight"] and header.tensor_count == 22
    np.testing.assert_array_equal(header.rope_tensors["rope_freqs.weight"], freqs)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256), st.integers(0, 400))
def test_any_bytes_after_a_valid_start_are_read_or_refused_by_name(tail: bytes, cut: int) -> None:
    file = gguf(LLAMA, [("rope_freqs.weight", FREQS)])
    body = file[:cut] + tail
    try:
        reader.read(body, limit=2**20)
    except GGUFError as error:
        assert error.param == "gguf" and error.message


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_mutated_file_is_read_or_refused_by_name(data: st.DataObject) -> None:
    file = bytearray(gguf(LLAMA, [("rope_freqs.weight", FREQS)]))
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(file) - 1))
        file[at] = data.draw(st.integers(0, 255))
    try:
        reader.read(bytes(file), limit=2**20)
    except GGUFError as error:
        assert error.param == "gguf" and error.message
