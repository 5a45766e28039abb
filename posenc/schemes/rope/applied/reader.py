"""The arrays of ``POST /v1/rope/applied``, read from their parts without trusting them: a
``.npy`` header is parsed from its first bytes alone and its shape held to the bytes that
follow before anything is made of them; a raw part's shape and dtype come from its own
``X-Array-Shape`` and ``X-Array-Dtype`` headers. The arrays are views of the received bytes
(never copies), kept in their own dtype; ``bfloat16`` (raw, or a ``.npy`` of two-byte void
values, as ml_dtypes writes it) is kept as its ``uint16`` words."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from posenc.declare import Part
from posenc.errors import InconsistentError, LimitError
from posenc.numerics.exact import MAX_POSITION

# Precision (bits, the leading one included) and smallest normal exponent of each dtype: what
# a value's rounding in it can be.
PRECISION: dict[str, tuple[int, int]] = {
    "float16": (11, -14),
    "bfloat16": (8, -126),
    "float32": (24, -126),
    "float64": (53, -1022),
}
FLOATS = tuple(PRECISION)
INTEGERS = ("int32", "int64")
MAX_RANK = 6
_HEADER_BYTES = 2**16
_STORED = {"bfloat16": "<u2"}


@dataclass(frozen=True)
class Given:
    """An array read from a part: ``values`` its bytes viewed in ``dtype`` (``bfloat16`` as
    ``uint16`` words)."""

    values: npt.NDArray[Any]
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


@dataclass(frozen=True)
class Declared:
    """What a part says of its array: shape, dtype, where its values start, and whether they
    are stored in Fortran order."""

    shape: tuple[int, ...]
    dtype: str
    start: int = 0
    fortran: bool = False


def declared(part: Part, name: str, allowed: tuple[str, ...]) -> Declared:
    """The shape, dtype and first data byte a part declares, checked against its length: what
    sizing a request reads before anything is allocated. A kernel's array (``allowed`` floats)
    has a token axis and a head axis at least."""
    data = part.data
    if bytes(data[: len(npy_format.MAGIC_PREFIX)]) == npy_format.MAGIC_PREFIX:
        found = _npy_header(data, name)
    else:
        found = _raw_header(part.headers, name)
    shape, dtype = found.shape, found.dtype
    if dtype not in allowed:
        raise InconsistentError(name, f"dtype must be one of {', '.join(allowed)}, got {dtype}")
    if len(shape) > MAX_RANK:
        raise InconsistentError(name, f"may have at most {MAX_RANK} axes, got {len(shape)}")
    if allowed == FLOATS:
        check_axes(shape, name)
    values = math.prod(shape)
    size = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    if values == 0:
        raise InconsistentError(name, f"is empty: shape {list(shape)}")
    if values * size != len(data) - found.start:
        raise InconsistentError(
            name,
            f"shape {list(shape)} of {dtype} needs {values * size} bytes, the part has "
            f"{len(data) - found.start}",
        )
    return found


def check_axes(shape: tuple[int, ...], name: str) -> None:
    """A kernel's array holds a token axis and a head axis at least."""
    if len(shape) < 2:
        raise InconsistentError(name, f"needs a token axis and a head axis, got {list(shape)}")


def read(part: Part, name: str, allowed: tuple[str, ...]) -> Given:
    """The array a part holds, viewed in place, in its own dtype."""
    found = declared(part, name, allowed)
    stored = np.dtype(_STORED.get(found.dtype, found.dtype)).newbyteorder("<")
    flat = np.frombuffer(part.data, dtype=stored, offset=found.start)
    shape = found.shape
    values = flat.reshape(shape[::-1]).T if found.fortran else flat.reshape(shape)
    return Given(values, found.dtype)


def _npy_header(data: bytes | bytearray | memoryview, name: str) -> Declared:
    """``.npy`` versions 1 to 3, read by NumPy's own header reader from a copy of the first
    bytes alone; its dtype named as the raw parts name theirs (two-byte void values, as
    ml_dtypes writes bfloat16, are bfloat16)."""
    stream = io.BytesIO(bytes(data[: _HEADER_BYTES + 16]))
    try:
        version = npy_format.read_magic(stream)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"version {version[0]}.{version[1]} is not read here")
        read = (
            npy_format.read_array_header_1_0
            if version == (1, 0)
            else npy_format.read_array_header_2_0
        )
        shape, fortran, dtype = read(stream, max_header_size=_HEADER_BYTES)
    except (ValueError, RecursionError, MemoryError) as error:
        raise InconsistentError(name, f"is not a valid .npy file: {str(error)[:80]}") from None
    if any(size < 0 for size in shape):
        raise InconsistentError(name, f"is not a valid .npy file: shape {list(shape)}")
    return Declared(tuple(shape), _dtype_name(dtype), stream.tell(), fortran)


def _dtype_name(dtype: np.dtype[Any]) -> str:
    """A little-endian dtype's name, bfloat16 for two-byte void values; its ``str`` otherwise
    (refused by :func:`declared`)."""
    plain = dtype.names is None and dtype.subdtype is None and dtype.byteorder != ">"
    if plain and dtype.kind == "V" and dtype.itemsize == 2:
        return "bfloat16"
    return dtype.name if plain and dtype.kind in "fi" else dtype.str


def _raw_header(headers: Mapping[str, str], name: str) -> Declared:
    shape_text, dtype = headers.get("x-array-shape"), headers.get("x-array-dtype")
    if shape_text is None or dtype is None:
        raise InconsistentError(
            name,
            "is neither .npy nor raw bytes with part headers X-Array-Shape (e.g. 4096,32,128) "
            "and X-Array-Dtype",
        )
    if not re.fullmatch(rf"[1-9][0-9]{{0,9}}(,[1-9][0-9]{{0,9}}){{0,{MAX_RANK - 1}}}", shape_text):
        raise InconsistentError(
            f"{name}.X-Array-Shape",
            f"must be 1 to {MAX_RANK} comma-separated sizes, each ≥ 1, got {shape_text[:40]!r}",
        )
    return Declared(tuple(int(size) for size in shape_text.split(",")), dtype.strip())


def positions(given: npt.NDArray[Any] | None, tokens: int, offset: int) -> npt.NDArray[np.int64]:
    """The ids of the tokens: ``given``, checked (:func:`checked_ids`); without them,
    ``offset, offset + 1, …``."""
    if given is not None:
        return checked_ids(given, tokens)
    if offset + tokens - 1 > MAX_POSITION:
        raise LimitError(
            "offset", f"positions reach {offset + tokens - 1}, past 2^31 − 1 = {MAX_POSITION}"
        )
    return np.arange(offset, offset + tokens, dtype=np.int64)


def checked_ids(given: npt.NDArray[Any], tokens: int) -> npt.NDArray[np.int64]:
    """Integer ids of shape ``(tokens,)`` or ``(3, tokens)``, each in ``[0, 2^31)``."""
    if given.shape not in ((tokens,), (3, tokens)):
        raise InconsistentError(
            "positions",
            f"must have shape ({tokens},) or (3, {tokens}), one id (or M-RoPE's three) a token "
            f"of the token axis, got {list(given.shape)}",
        )
    if not np.issubdtype(given.dtype, np.integer):
        raise InconsistentError("positions", f"must be integers, got {given.dtype}")
    ids = given.astype(np.int64)
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high > MAX_POSITION:
        bad = low if low < 0 else high
        raise InconsistentError(
            "positions", f"must be in [0, 2^31 − 1], got {bad} at index {_first(ids, bad)}"
        )
    return ids


def _first(ids: npt.NDArray[np.int64], value: int) -> list[int]:
    return [int(k) for k in np.argwhere(ids == value)[0]]
