"""``.npy`` bodies: NumPy's own header, then the data read as raw bytes of that shape."""

from __future__ import annotations

import io

import numpy as np
import numpy.typing as npt

from app.bodies.dtypes import DTYPES
from app.bodies.raw import from_bytes
from posenc.errors import ParameterError


def read_npy(body: bytes | bytearray) -> npt.NDArray[np.floating]:
    # The header is small: read it from a copy of its first bytes, never of the whole body.
    stream = io.BytesIO(bytes(body[: 2**16 + 16]))
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    except ValueError as e:
        raise ParameterError("body", f"not a valid .npy file: {e}") from None
    if dtype.name not in DTYPES:
        raise ParameterError("body", f"dtype must be one of {', '.join(DTYPES)}, got {dtype}")
    return from_bytes(body, stream.tell(), shape, dtype, "body", "F" if fortran else "C")
