"""What a recipe prepares once per table: a function from positions to the cos, sin and angle
of each pair, ``(n, d/2)`` each (cos and sin float32, the angle float32 or RoFormer's float64),
as the framework or runtime computes them. Preparing derives the recipe's parameters (and
refuses a rope it does not implement) before any row is computed or any output allocated;
:func:`table` then lays the rows out as every served table is laid out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.numerics.float32 import BLOCK_ELEMENTS, Float32Array

Halves = tuple[Float32Array, Float32Array, npt.NDArray[np.floating[Any]]]
Rows = Callable[[npt.NDArray[np.int64]], Halves]


def table(
    rows: Rows,
    positions: npt.NDArray[np.int64],
    d_model: int,
    layout: str,
    dtype: str,
    component: str,
) -> npt.NDArray[np.floating[Any]]:
    """``component`` of the rows at ``positions``, block by block, cast to ``dtype``:
    ``cos_sin`` ``(2, n, d)``, ``cos``/``sin`` ``(n, d)`` expanded to the layout, ``angle``
    ``(n, d/2)``."""
    n, half = len(positions), d_model // 2
    block_rows = max(1, BLOCK_ELEMENTS // half)
    if component == "angle":
        out = np.empty((n, half), dtype=dtype)
    else:
        planes = 2 if component == "cos_sin" else 1
        out = np.empty((planes, n, d_model), dtype=dtype)
    for start in range(0, n, block_rows):
        checkpoint()
        block = slice(start, start + block_rows)
        cos, sin, angle = rows(positions[block])
        if component == "angle":
            out[block] = angle
            continue
        chosen = {"cos_sin": (cos, sin), "cos": (cos,), "sin": (sin,)}[component]
        for plane, value in enumerate(chosen):
            if layout == "split":
                out[plane, block, :half], out[plane, block, half:] = value, value
            else:
                out[plane, block, 0::2], out[plane, block, 1::2] = value, value
    return out if component in ("cos_sin", "angle") else out[0]
