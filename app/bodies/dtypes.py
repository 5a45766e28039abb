"""The array types a body may hold, one list for every format, so none accepts what another
refuses."""

from __future__ import annotations

from typing import Any

import numpy as np

from posenc.errors import ParameterError

# int32 for integer arrays (relative buckets), compared for equality.
DTYPES = ("float16", "float32", "float64", "int32")


def dtype_named(name: str, where: str) -> np.dtype[Any]:
    if name not in DTYPES:
        raise ParameterError(where, f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return np.dtype(name).newbyteorder("<")
