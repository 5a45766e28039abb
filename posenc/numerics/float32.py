"""float32 arithmetic as PyTorch performs it, for the ``framework`` recipes of every scheme.

A model was trained with the table its framework computed, not with the exact one: positions
rounded to float32, frequencies from float32 ``pow``/``exp``, angles ``fl32(pos · ω)`` whose error
grows with the position. Each scheme's ``framework`` module reproduces its library's computation
with these operations, each float32 operation as one correctly rounded float32 NumPy operation in
the order the library runs them.

Where the library calls a transcendental function (torch's ``pow``, ``exp``, ``sin``, ``cos`` on
float32 tensors), its CPU kernels (SLEEF, 1-ulp) are not correctly rounded and differ between
vectorised and scalar paths. We take the correctly rounded float32 result instead — the float64
value of the function at the float32 argument, rounded once — which is within 1 ulp of every
such kernel: the one place where our bits may differ from the library's.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Recipe = Literal["exact", "framework"]
F32 = np.float32
Float32Array = npt.NDArray[np.float32]
# cos and sin of one block of float64 angles take about 20 ms at this many elements.
BLOCK_ELEMENTS = 1 << 17


def scalar(x: float) -> np.float32:
    """A Python number as torch casts a scalar operand of a float32 tensor operation."""
    return np.float32(x)


def power(base: np.float32, exponents: Float32Array) -> Float32Array:
    """``base ** exponents`` in float32, correctly rounded (torch's SLEEF ``powf``: 1 ulp)."""
    return np.power(np.float64(base), exponents.astype(np.float64)).astype(F32)


def exp(x: Float32Array) -> Float32Array:
    """float32 ``exp``, correctly rounded (torch's SLEEF ``expf``: within 1 ulp)."""
    return np.exp(x.astype(np.float64)).astype(F32)


def reciprocal(x: Float32Array) -> Float32Array:
    """torch's ``s / t`` for a Python scalar ``s`` is ``t.reciprocal() * s``, not a division."""
    return (F32(1) / x).astype(F32)


def sincos(angles: npt.NDArray[np.floating[Any]]) -> tuple[Float32Array, Float32Array]:
    """Correctly rounded float32 ``sin`` and ``cos`` of float32 (or float64) angles (exact
    float64 reduction)."""
    wide = angles.astype(np.float64, copy=False)  # RoFormer's float64 angles as they are
    return np.sin(wide).astype(F32), np.cos(wide).astype(F32)


def angles(positions: npt.NDArray[np.int64], omega: Float32Array) -> Float32Array:
    """``fl32(fl32(pos) · ω)``: positions past 2^24 round to float32 first, as ``.float()`` does."""
    return (positions.astype(F32)[:, None] * omega[None, :]).astype(F32)
