"""A client's table, read in the format its Content-Type names, then held to the rules every
table keeps whatever its format: 1- to 3-D, non-empty, finite.

The formats are :mod:`app.bodies.npy`, :mod:`app.bodies.raw`, and JSON as
``{"data": [[...], ...]}`` read by :mod:`app.bodies.json_object`; the JSON form's errors are
renamed here to the table's own parameters, as the binary forms name theirs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from fastapi.exceptions import RequestValidationError

from app.bodies.dtypes import dtype_named
from app.bodies.json_object import read_object
from app.bodies.npy import read_npy
from app.bodies.raw import array_headers, read_raw
from posenc.errors import InconsistentError, ParameterError

MEDIA_TYPES = ("application/x-npy", "application/octet-stream", "application/json")

_FINITE_BLOCK_BYTES = 2**20


def read_table(
    body: bytes | bytearray, content_type: str, headers: Mapping[str, str], json_dtype: str
) -> npt.NDArray[np.floating]:
    media_type = content_type.split(";")[0].strip().lower()
    shape, dtype = array_headers(headers.get("x-array-shape"), headers.get("x-array-dtype"))
    if media_type == "application/x-npy":
        table = read_npy(body)
    elif media_type == "application/octet-stream":
        table = read_raw(body, shape, dtype)
    elif media_type == "application/json":
        table = _json_table(body, json_dtype)
    else:
        raise ParameterError(
            "body", f"Content-Type must be one of {', '.join(MEDIA_TYPES)}, got {media_type!r}"
        )
    if not 1 <= table.ndim <= 3 or 0 in table.shape:
        raise ParameterError(
            "body", f"the array must be 1-, 2- or 3-D and non-empty, got shape {table.shape}"
        )
    _check_finite(table.reshape(table.shape[0], -1))
    return table


def _check_finite(table: npt.NDArray[np.floating]) -> None:
    # In blocks of rows: a whole-table boolean mask would cost a quarter of a float32 body.
    step = max(1, _FINITE_BLOCK_BYTES // max(1, table.shape[1]))
    for start in range(0, len(table), step):
        finite = np.isfinite(table[start : start + step]).all(axis=1)
        if not finite.all():
            row = start + int(np.argmin(finite))
            # Finite values are a rule of the body that its schema (binary) cannot state.
            raise InconsistentError("body", f"row {row} holds NaN or infinity")


def _json_table(body: bytes | bytearray, dtype: str) -> npt.NDArray[np.floating]:
    target = dtype_named(dtype, "dtype").newbyteorder("=")
    try:
        small, arrays = read_object(body, {"data": 2}, dtypes={"data": target})
    except RequestValidationError as e:
        error = e.errors()[0]
        loc = error["loc"][1:]
        if loc and loc[0] == "data":
            where = "".join(f"[{part}]" for part in loc[1:])
            kind = InconsistentError if error["type"] == "inconsistent" else ParameterError
            raise kind("data", f"{where} {error['msg']}".strip()) from None
        raise ParameterError("body", f"not a valid table: {error['msg']}") from None
    table = arrays.get("data")
    if small or table is None:
        raise ParameterError("body", 'JSON bodies are {"data": [[...], ...]} and nothing else')
    return table
