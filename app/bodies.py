"""A client's table from a request body: .npy, raw bytes with shape/dtype headers, or JSON.

Nothing in a body is trusted: the header's shape must match the byte count, the dtype must be
one we compare in, and the table must be finite and two-dimensional.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from posenc.errors import ParameterError

DTYPES = ("float16", "float32", "float64")
MEDIA_TYPES = ("application/x-npy", "application/octet-stream", "application/json")


def read_table(
    body: bytes, content_type: str, headers: dict[str, str], json_dtype: str
) -> npt.NDArray[np.floating]:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "application/x-npy":
        table = _npy(body)
    elif media_type == "application/octet-stream":
        table = _raw(body, headers.get("x-array-shape"), headers.get("x-array-dtype"))
    elif media_type == "application/json":
        table = _json(body, json_dtype)
    else:
        raise ParameterError(
            "body", f"Content-Type must be one of {', '.join(MEDIA_TYPES)}, got {media_type!r}"
        )
    if table.ndim != 2 or 0 in table.shape:
        raise ParameterError(
            "body", f"the table must be 2-D and non-empty, got shape {table.shape}"
        )
    finite = np.isfinite(table).all(axis=1)
    if not finite.all():
        raise ParameterError("body", f"row {int(np.argmin(finite))} holds NaN or infinity")
    return table


def _dtype(name: str, where: str) -> np.dtype[Any]:
    if name not in DTYPES:
        raise ParameterError(where, f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return np.dtype(name).newbyteorder("<")


def _npy(body: bytes) -> npt.NDArray[np.floating]:
    stream = io.BytesIO(body)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    except ValueError as e:
        raise ParameterError("body", f"not a valid .npy file: {e}") from None
    if dtype.kind != "f" or dtype.name not in DTYPES:
        raise ParameterError("body", f"dtype must be one of {', '.join(DTYPES)}, got {dtype}")
    return _from_bytes(body[stream.tell() :], shape, dtype, "body", "F" if fortran else "C")


def _raw(
    body: bytes, shape_header: str | None, dtype_header: str | None
) -> npt.NDArray[np.floating]:
    if shape_header is None or dtype_header is None:
        raise ParameterError(
            "X-Array-Shape", "raw bodies need X-Array-Shape (e.g. 128,512) and X-Array-Dtype"
        )
    try:
        shape = tuple(int(part) for part in shape_header.split(","))
    except ValueError:
        raise ParameterError(
            "X-Array-Shape", f"must be comma-separated integers, got {shape_header!r}"
        ) from None
    if any(n < 0 for n in shape):
        raise ParameterError("X-Array-Shape", f"must not be negative, got {shape_header!r}")
    return _from_bytes(body, shape, _dtype(dtype_header.strip(), "X-Array-Dtype"), "X-Array-Shape")


def _from_bytes(
    data: bytes, shape: tuple[int, ...], dtype: np.dtype[Any], where: str, order: str = "C"
) -> npt.NDArray[np.floating]:
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if expected != len(data):
        raise ParameterError(
            where,
            f"shape {list(shape)} of {dtype} needs {expected} bytes, the body has {len(data)}",
        )
    flat = np.frombuffer(data, dtype=dtype)
    table = flat.reshape(shape[::-1]).T if order == "F" else flat.reshape(shape)
    return np.ascontiguousarray(table, dtype=dtype.newbyteorder("="))


def _json(body: bytes, dtype: str) -> npt.NDArray[np.floating]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise ParameterError("body", f"not valid JSON: {e}") from None
    if not isinstance(document, dict) or set(document) != {"data"}:
        raise ParameterError("body", 'JSON bodies are {"data": [[...], ...]} and nothing else')
    try:
        table = np.array(document["data"], dtype=np.float64)
    except (ValueError, TypeError):
        raise ParameterError("data", "must be a rectangular list of lists of numbers") from None
    return table.astype(_dtype(dtype, "dtype").newbyteorder("="))
