"""Raw binary bodies: bytes whose shape and dtype come in X-Array-Shape and X-Array-Dtype.

:func:`from_bytes` is also how an ``.npy`` body's data is read once its header is parsed
(:mod:`app.bodies.npy`): both are the received bytes, viewed, never parsed.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bodies.dtypes import dtype_named
from app.models import SHAPE_PATTERN
from posenc.errors import InconsistentError, ParameterError


def read_raw(
    body: bytes | bytearray, shape: tuple[int, ...] | None, dtype: np.dtype[Any] | None
) -> npt.NDArray[np.floating]:
    """The body's bytes as the array ``X-Array-Shape`` and ``X-Array-Dtype`` (read by
    :func:`array_headers`) say."""
    if shape is None or dtype is None:
        raise InconsistentError(
            "X-Array-Shape", "raw bodies need X-Array-Shape (e.g. 128,512) and X-Array-Dtype"
        )
    return from_bytes(body, 0, shape, dtype, "X-Array-Shape")


def array_headers(
    shape_header: str | None, dtype_header: str | None
) -> tuple[tuple[int, ...] | None, np.dtype[Any] | None]:
    """X-Array-Shape and X-Array-Dtype, each checked where given, whatever the body's format:
    a header its documented pattern refuses is refused, never ignored."""
    shape = None
    if shape_header is not None:
        if not re.fullmatch(SHAPE_PATTERN, shape_header.strip()):
            raise ParameterError(
                "X-Array-Shape",
                f"must be 1 to 3 comma-separated sizes, each ≥ 1, got {shape_header[:40]!r}",
            )
        shape = tuple(int(part) for part in shape_header.split(","))
    dtype = None if dtype_header is None else dtype_named(dtype_header.strip(), "X-Array-Dtype")
    return shape, dtype


def from_bytes(
    data: bytes | bytearray,
    offset: int,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    where: str,
    order: str = "C",
) -> npt.NDArray[np.floating]:
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if expected != len(data) - offset:
        raise InconsistentError(
            where,
            f"shape {list(shape)} of {dtype} needs {expected} bytes, "
            f"the body has {len(data) - offset}",
        )
    flat = np.frombuffer(data, dtype=dtype, offset=offset)
    table = flat.reshape(shape[::-1]).T if order == "F" else flat.reshape(shape)
    # A view of the received bytes when they are native C order; else the one copy.
    return np.ascontiguousarray(table, dtype=dtype.newbyteorder("="))
