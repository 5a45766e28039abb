"""GGUF files built by hand, byte by byte, for the reader's tests: what a converter writes,
and what a hostile client might claim."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

STRING, ARRAY = 8, 9
_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip


# The keys of a tiny two-layer Llama with Llama 3's base: the smallest header a rope is read from.
TINY_LLAMA: dict[str, Any] = {
    "general.architecture": "llama",
    "llama.context_length": 8192,
    "llama.block_count": 2,
    "llama.embedding_length": 64,
    "llama.attention.head_count": 4,
    "llama.rope.freq_base": 500000.0,
}


def string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def value(kind: int, item: Any) -> bytes:
    if kind == STRING:
        return string(item)
    return struct.pack(_FORMATS[kind], item)


def kv(key: str, kind: int, item: Any) -> bytes:
    return string(key) + struct.pack("<I", kind) + value(kind, item)


def array(key: str, element: int, items: Sequence[Any]) -> bytes:
    body = b"".join(value(element, item) for item in items)
    return string(key) + struct.pack("<IIQ", ARRAY, element, len(items)) + body


def infer(key: str, item: Any) -> bytes:
    """A key/value with the type the converter gives a Python value of that kind."""
    if isinstance(item, bool):
        return kv(key, 7, item)
    if isinstance(item, int):
        return kv(key, 4, item)
    if isinstance(item, float):
        return kv(key, 6, item)
    if isinstance(item, str):
        return kv(key, STRING, item)
    items = list(item)
    if items and isinstance(items[0], str):
        return array(key, STRING, items)
    if items and isinstance(items[0], float):
        return array(key, 6, items)
    return array(key, 5, items)


def gguf(
    values: dict[str, Any],
    tensors: Iterable[tuple[str, np.ndarray[Any, Any]]] = (),
    version: int = 3,
    alignment: int = 32,
    raw_kvs: Sequence[bytes] = (),
) -> bytes:
    """A whole GGUF file: ``values`` as the converter types them, then ``tensors`` (1-D F32 or
    F16) in order, each aligned, as llama.cpp's writer lays them out."""
    tensors = list(tensors)
    kvs = [infer(key, item) for key, item in values.items()] + list(raw_kvs)
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    data = b""
    infos = b""
    for name, tensor in tensors:
        ggml_type = {np.dtype("<f4"): 0, np.dtype("<f2"): 1}[tensor.dtype]
        infos += string(name) + struct.pack("<I", tensor.ndim)
        infos += b"".join(struct.pack("<Q", d) for d in reversed(tensor.shape))
        infos += struct.pack("<IQ", ggml_type, len(data))
        data += tensor.tobytes()
        data += b"\0" * (-len(data) % alignment)
    header = head + infos
    header += b"\0" * (-len(header) % alignment)
    return header + data


def llama_31_prefix() -> bytes:
    """The first bytes of a Llama 3.1 8B GGUF as llama.cpp's converter writes them, less its
    vocabulary: the keys a rope is read from and the ``rope_freqs`` tensor, the one the
    converter wrote for Llama 3.1's rope (head 128, base 500000, factor 8, bands 1 and 4 of
    8192: tests/gguf/records' ``llama3.1``). What the documentation's examples read as
    ``model.gguf``."""
    from tests.gguf.records import load

    cases = {case["name"]: case for case in load("scalings")["cases"]}
    converted = cases["llama3.1"]["rope_tensors"]["rope_freqs.weight"]
    values = {
        "general.architecture": "llama",
        "general.name": "Meta Llama 3.1 8B",
        "llama.block_count": 32,
        "llama.context_length": 131072,
        "llama.embedding_length": 4096,
        "llama.feed_forward_length": 14336,
        "llama.attention.head_count": 32,
        "llama.attention.head_count_kv": 8,
        "llama.rope.freq_base": 500000.0,
        "llama.rope.dimension_count": 128,
        "llama.vocab_size": 128256,
    }
    return gguf(values, [("rope_freqs.weight", np.array(converted, dtype=np.float32))])
