"""A bounded reader of a GGUF file's header: what llama.cpp's rope reads, from a prefix.

A GGUF file is, in order (little-endian; ``gguf.cpp`` of llama.cpp, versions 2 and 3)::

    "GGUF"  version:u32  n_tensors:u64  n_kv:u64
    n_kv × (key:str  type:u32  value)        str = length:u64 + bytes (UTF-8)
    n_tensors × (name:str  n_dims:u32  dims:u64×n_dims  ggml_type:u32  offset:u64)
    padding to general.alignment (default 32), then the data; offsets count from its start

Everything a file claims (a count, a length, a type) is held against the bytes that are
there before anything is built from it, so a hostile header costs no more than its own bytes
and is refused with what it claimed: an array of 2^60 values needs more bytes than any body.
Values no rope reads (the vocabulary's strings, long texts) are stepped over, not built: a
64 MiB prefix holds a 256k-token vocabulary. A prefix that stops inside the header, or before
a rope tensor's data, raises :class:`PrefixTooShortError` with the bytes to send.

>>> import struct
>>> def s(text): return struct.pack("<Q", len(text)) + text.encode()
>>> head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2)
>>> kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")
>>> kv += s("llama.rope.freq_base") + struct.pack("<If", 6, 500000.0)
>>> header = read(head + kv)
>>> header.architecture, header.values["llama.rope.freq_base"]
('llama', 500000.0)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.errors import IncompleteError, InconsistentError, LimitError, ParameterError
from posenc.schemes.rope.gguf import keys, loops

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ROPE_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")

# gguf_type: (name, size in bytes, struct format) for the fixed-size values.
_FIXED: dict[int, tuple[str, int, str]] = {
    0: ("UINT8", 1, "<B"),
    1: ("INT8", 1, "<b"),
    2: ("UINT16", 2, "<H"),
    3: ("INT16", 2, "<h"),
    4: ("UINT32", 4, "<I"),
    5: ("INT32", 4, "<i"),
    6: ("FLOAT32", 4, "<f"),
    7: ("BOOL", 1, "<?"),
    10: ("UINT64", 8, "<Q"),
    11: ("INT64", 8, "<q"),
    12: ("FLOAT64", 8, "<d"),
}
_NUMPY: dict[int, str] = {
    0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
    10: "<u8", 11: "<i8", 12: "<f8",
}  # fmt: skip
_STRING = 8
_ARRAY = 9
# ggml_type of the rope tensors' data: F32 is what the converter writes; F16 is read too.
_TENSOR_DTYPES: dict[int, tuple[str, str]] = {0: ("F32", "<f4"), 1: ("F16", "<f2")}

# A string longer than this is never a rope key's value: stepped over.
_LONGEST_KEPT_STRING = 256
# A numeric array longer than this (a vocabulary's scores) is never a rope key's: stepped over
# (LLAMA_MAX_LAYERS is 512: a per-layer array is shorter).
_LONGEST_KEPT_ARRAY = 4096
# Kept values at most: a file claiming more rope keys is refused, so what is built from a body
# stays a few MiB whatever the body holds.
_MOST_KEPT = 256
# Factors in one rope tensor at most: n_rot/2 of the widest rope served (d_model ≤ 65536).
_LONGEST_ROPE_TENSOR = 32768
# Strings stepped over between two cancellation checkpoints (≈ 4 ms compiled).
_STRINGS_PER_CHECK = 1 << 20
# Tensor infos stepped over between two cancellation checkpoints (≈ 25 ms compiled).
_INFOS_PER_CHECK = 1 << 20
# The least bytes a key/value and a tensor info take (empty key, a u8 value; no dimension).
_SMALLEST_KV = 8 + 4 + 1
_SMALLEST_TENSOR_INFO = 8 + 4 + 4 + 8
_MAX_DIMS = 4  # GGML_MAX_DIMS
_LONGEST_NAME = 64  # GGML_MAX_NAME


class GGUFError(InconsistentError):
    """The body is not a GGUF file llama.cpp would read: the message says what is wrong and at
    which byte. The body's schema (bytes) cannot state GGUF's rules; its description does."""

    def __init__(self, message: str) -> None:
        ParameterError.__init__(self, "gguf", message)


class HeaderTooLongError(LimitError, GGUFError):
    """What the file claims needs more bytes than any prefix the caller reads."""


class PrefixTooShortError(IncompleteError, GGUFError):
    """The prefix ends before what is needed: ``needed_bytes`` from the file's start."""

    def __init__(self, message: str, needed: int) -> None:
        IncompleteError.__init__(self, "gguf", message, needed)


Value = bool | int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[bool, ...]


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section


@dataclass(frozen=True)
class Header:
    """What a GGUF prefix says of its rope: the kept values, the rope tensors' infos and data,
    and where the data starts. Other tensors are counted, not kept."""

    version: int
    tensor_count: int
    kv_count: int
    values: Mapping[str, Value]
    tensors: Mapping[str, TensorInfo]
    alignment: int
    data_start: int
    rope_tensors: Mapping[str, npt.NDArray[np.float32]]

    @property
    def architecture(self) -> str:
        arch = self.values.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFError("the file has no general.architecture string")
        return arch


class _Cursor:
    __slots__ = ("at", "data", "end", "limit")

    def __init__(self, data: memoryview, limit: int | None) -> None:
        self.data = data
        self.at = 0
        self.end = len(data)
        self.limit = limit

    def need(self, count: int, what: str) -> None:
        if count > self.end - self.at:
            if self.limit is not None and self.at + count > self.limit:
                raise HeaderTooLongError(
                    f"{what} needs {count} bytes at byte {self.at}: a header that long is "
                    f"beyond the {self.limit} bytes of a prefix read here (a count or length "
                    "the file claims is wrong, or its header is too large)"
                )
            raise PrefixTooShortError(
                f"{what} needs {count} bytes at byte {self.at}, beyond the {self.end} bytes "
                f"sent: send at least the first {self.at + count} bytes of the file",
                self.at + count,
            )

    def unpack(self, fmt: str, size: int, what: str) -> Any:
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def u32(self, what: str) -> int:
        value: int = self.unpack("<I", 4, what)
        return value

    def u64(self, what: str) -> int:
        value: int = self.unpack("<Q", 8, what)
        return value

    def string(self, what: str, longest: int | None = None) -> str | None:
        """The string at the cursor, or None (stepped over) when longer than ``longest``."""
        length = self.u64(f"the length of {what}")
        self.need(length, f"{what} ({length} bytes long)")
        start = self.at
        self.at += length
        if longest is not None and length > longest:
            return None
        try:
            return bytes(self.data[start : self.at]).decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{what} at byte {start} is not UTF-8") from None

    def skip_strings(self, count: int, what: str) -> None:
        # Each string is at least its 8-byte length: a count the bytes cannot hold is refused
        # before a single one is read. The walk over the lengths is compiled: a vocabulary of
        # 256k tokens takes ~1 ms, a body of nothing but empty strings ~30 ms (1.8 s in Python).
        self.need(8 * count, f"{what}: {count} strings")
        data = np.frombuffer(self.data, np.uint8)
        done = 0
        while done < count:
            checkpoint()
            chunk = min(count - done, _STRINGS_PER_CHECK)
            at, failed, needed = loops.skip(data, self.at, chunk, self.end)
            self.at = int(at)
            if failed >= 0:
                index = done + int(failed)
                if needed < 0:
                    self.need(8, f"the length of string {index} of {what}")
                self.need(int(needed), f"string {index} of {what} ({int(needed)} bytes long)")
            done += chunk


def _type_name(kind: int) -> str:
    if kind == _STRING:
        return "STRING"
    if kind == _ARRAY:
        return "ARRAY"
    return _FIXED[kind][0]


def _value(cursor: _Cursor, kind: int, key: str, keep: bool) -> Value | None:
    if kind in _FIXED:
        _, size, fmt = _FIXED[kind]
        value: Value = cursor.unpack(fmt, size, f"the value of {key}")
        return value if keep else None
    if kind == _STRING:
        return cursor.string(f"the value of {key}", _LONGEST_KEPT_STRING if keep else 0)
    if kind != _ARRAY:
        raise GGUFError(f"{key} has value type {kind} at byte {cursor.at - 4}: not a GGUF type")
    element = cursor.u32(f"the element type of {key}")
    count = cursor.u64(f"the length of {key}")
    if element == _ARRAY:
        raise GGUFError(f"{key} is an array of arrays: llama.cpp reads no nested arrays")
    if element == _STRING:
        cursor.skip_strings(count, key)
        return None
    if element not in _FIXED:
        raise GGUFError(f"{key} is an array of type {element}: not a GGUF type")
    size = _FIXED[element][1]
    # count·size as Python integers: no overflow, and refused before any allocation.
    cursor.need(count * size, f"{key}: {count} values of {_type_name(element)}")
    start = cursor.at
    cursor.at += count * size
    if not keep or count > _LONGEST_KEPT_ARRAY:
        return None
    values = np.frombuffer(cursor.data, _NUMPY[element], count, start)
    if element == 7:
        return tuple(bool(v) for v in values)
    return tuple(values.tolist())


def _tensor_info(cursor: _Cursor, index: int) -> TensorInfo:
    what = f"tensor info {index}"
    name = cursor.string(f"the name of {what}", _LONGEST_NAME)
    if name is None:
        raise GGUFError(f"the name of {what} is longer than {_LONGEST_NAME} bytes")
    n_dims = cursor.u32(f"the dimension count of {name}")
    if not 1 <= n_dims <= _MAX_DIMS:
        raise GGUFError(f"tensor {name} has {n_dims} dimensions: 1 to {_MAX_DIMS} are allowed")
    dims = tuple(cursor.u64(f"dimension {d} of {name}") for d in range(n_dims))
    ggml_type = cursor.u32(f"the type of {name}")
    offset = cursor.u64(f"the offset of {name}")
    return TensorInfo(name, dims, ggml_type, offset)


_NAMES = np.zeros((len(ROPE_TENSORS), _LONGEST_NAME), np.uint8)
for _row, _name in enumerate(ROPE_TENSORS):
    _NAMES[_row, : len(_name)] = np.frombuffer(_name.encode(), np.uint8)
_NAME_LENGTHS = np.array([len(name) for name in ROPE_TENSORS], np.int64)


def compile_loops() -> None:
    """Step once over a string and over no tensor info, with the types a read meets (a body's
    bytes are read-only), so numba compiles both loops before the first file does."""
    data = np.frombuffer(b"\x01" + bytes(7) + b"a", np.uint8)
    loops.skip(data, 0, 1, len(data))
    loops.infos(data, 0, 0, len(data), _NAMES, _NAME_LENGTHS, np.zeros((8, 2), np.int64))


def _rope_infos(cursor: _Cursor, count: int) -> dict[str, TensorInfo]:
    """Step over ``count`` tensor infos (compiled: 2 million take ~50 ms), checking each one's
    bounds, and read the rope tensors' own."""
    data = np.frombuffer(cursor.data, np.uint8)
    found = np.zeros((8, 2), np.int64)
    tensors: dict[str, TensorInfo] = {}
    done = 0
    while done < count:
        checkpoint()
        chunk = min(count - done, _INFOS_PER_CHECK)
        at, failed, code, value, matches = loops.infos(
            data, cursor.at, chunk, cursor.end, _NAMES, _NAME_LENGTHS, found
        )
        for start, row in found[:matches]:
            name = ROPE_TENSORS[row]
            if name in tensors:
                raise GGUFError(f"tensor {name} appears twice")
            cursor.at = int(start)
            tensors[name] = _tensor_info(cursor, done)
        cursor.at = int(at)
        if failed >= 0:
            what = f"tensor info {done + int(failed)}"
            if code == 2:
                raise GGUFError(f"the name of {what} is longer than {_LONGEST_NAME} bytes")
            if code == 3:
                raise GGUFError(f"{what} has {value} dimensions: 1 to {_MAX_DIMS} are allowed")
            cursor.need(int(value), what)
        done += chunk
    return tensors


def read(data: bytes | bytearray | memoryview, limit: int | None = None) -> Header:
    """The header of the GGUF file whose first bytes are ``data``, with the rope tensors' data.

    Raises :class:`GGUFError` naming what is wrong, :class:`PrefixTooShortError` (one of them)
    with the bytes to send when the header or a rope tensor goes beyond ``data`` but within
    ``limit`` bytes (the longest prefix a caller takes); beyond ``limit``, a plain GGUFError.
    """
    view = memoryview(data).cast("B")
    cursor = _Cursor(view, limit)
    cursor.need(4, "the magic")
    if bytes(view[:4]) != MAGIC:
        raise GGUFError(f"the file starts with {bytes(view[:4])!r}, not GGUF's magic b'GGUF'")
    cursor.at = 4
    version = cursor.u32("the version")
    if version not in VERSIONS:
        raise GGUFError(f"GGUF version {version}: versions 2 and 3 are read")
    tensor_count = cursor.u64("the tensor count")
    kv_count = cursor.u64("the key/value count")
    # The least bytes the claimed counts take, checked before reading them one by one.
    cursor.need(
        kv_count * _SMALLEST_KV + tensor_count * _SMALLEST_TENSOR_INFO,
        f"{kv_count} key/values and {tensor_count} tensor infos",
    )
    values: dict[str, Value] = {}
    for index in range(kv_count):
        key = cursor.string(f"key {index}", _LONGEST_NAME * 4)
        if key is None:
            raise GGUFError(f"key {index} is longer than {_LONGEST_NAME * 4} bytes")
        kind = cursor.u32(f"the type of {key}")
        keep = keys.wanted(key)
        if keep and key in values:
            raise GGUFError(f"key {key} appears twice")
        value = _value(cursor, kind, key, keep)
        if value is not None:
            values[key] = value
            if len(values) > _MOST_KEPT:
                raise GGUFError(f"the file has more than {_MOST_KEPT} keys a rope may read")
    tensors = _rope_infos(cursor, tensor_count)
    alignment = values.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1:
        raise GGUFError(f"general.alignment is {alignment!r}: a positive power of two is needed")
    if alignment & (alignment - 1):
        raise GGUFError(f"general.alignment is {alignment}: not a power of two")
    data_start = -(-cursor.at // alignment) * alignment
    rope = {
        name: _tensor_data(view, tensors[name], data_start, alignment)
        for name in ROPE_TENSORS
        if name in tensors
    }
    return Header(version, tensor_count, kv_count, values, tensors, alignment, data_start, rope)


def _tensor_data(
    view: memoryview, info: TensorInfo, data_start: int, alignment: int
) -> npt.NDArray[np.float32]:
    if info.ggml_type not in _TENSOR_DTYPES:
        raise GGUFError(
            f"tensor {info.name} has ggml type {info.ggml_type}: F32 (0) or F16 (1) is read"
        )
    if len(info.dims) != 1:
        raise GGUFError(f"tensor {info.name} has dimensions {list(info.dims)}: one is expected")
    if info.offset % alignment:
        raise GGUFError(f"tensor {info.name}'s offset {info.offset} is not {alignment}-aligned")
    (count,) = info.dims
    if count > _LONGEST_ROPE_TENSOR:
        raise GGUFError(
            f"tensor {info.name} claims {count} factors: a rope of d_model ≤ 65536 has at most "
            f"{_LONGEST_ROPE_TENSOR}"
        )
    type_name, dtype = _TENSOR_DTYPES[info.ggml_type]
    size = np.dtype(dtype).itemsize
    start = data_start + info.offset
    stop = start + count * size
    if stop > len(view):
        raise PrefixTooShortError(
            f"tensor {info.name} ({count} × {type_name}) is at bytes {start}–{stop - 1}, "
            f"beyond the {len(view)} bytes sent: send at least the first {stop} bytes",
            stop,
        )
    values = np.frombuffer(view, dtype, count, start).astype(np.float32)
    values.flags.writeable = False
    return values
