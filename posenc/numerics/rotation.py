"""Consecutive positions by rotation from exact anchors: the relative-position identity as engine.

``PE(a + k) = M_k · PE(a)`` pair by pair. Written with complex numbers ``z = sin θ + i·cos θ``
(sine first, so that a complex array viewed as floats *is* the interleaved row
``sin, cos, sin, cos …``), the rotation is one complex product: ``z(a+k) = z(a) · conj(w_k)``
with ``w_k = cos kω + i·sin kω``, written out in real arithmetic as
``(zr·tr − zi·ti) + i·(zr·ti + zi·tr)``: NumPy's own complex product fuses multiply-adds on
some CPUs and not on others, and the compiled path (:mod:`.kernels`) must repeat this
one bit for bit. Super-anchors every ``BLOCK²`` positions and the twiddles
come from the exact path (:func:`.exact.sincos`), so errors never accumulate: each value
is two rotations away from exact float64 numbers.

Error: each rotation of unit complex numbers adds at most ~2^-50 absolute (four float64
roundings) and the exact inputs carry ≤ 1 ulp, so after two rotations every value is within
``ε ≤ 2^-48`` of the exact one. That is far below a float32 ulp for ordinary values, but not for
values near zero, so every value with ``|v| < 2^-10`` is recomputed on the exact path; for the
rest ``ε / ulp32(v) ≤ 2^-48 / 2^-34``, so a float32 (or float16) value is within
``0.5 + 2^-14`` ulp of the exact one. Float64 tables do
not come through here: ``ε`` is several float64 ulps.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.numerics.exact import Float64Array, Turns, sincos, sincos_pairs

BLOCK = 16
SMALL = 2.0**-10
# Pairs per working chunk (2 MiB of complex values): large enough that the per-chunk Python
# work is small; of 16K, 32K, 64K and 128K pairs, measured here, this was the fastest.
_WORKING_PAIRS = 131072
_RECOMPUTE = 16384


def _as_z(sin: Float64Array, cos: Float64Array) -> npt.NDArray[np.complex128]:
    z = np.empty(sin.shape, dtype=np.complex128)
    z.real, z.imag = sin, cos
    return z


def times(
    z: npt.NDArray[np.complex128],
    w: npt.NDArray[np.complex128],
    out: npt.NDArray[np.complex128] | None = None,
) -> npt.NDArray[np.complex128]:
    """``z · w`` as ``(zr·wr − zi·wi) + i·(zr·wi + zi·wr)``, each product rounded (no FMA)."""
    shape = np.broadcast_shapes(z.shape, w.shape)
    if out is None:
        out = np.empty(shape, dtype=np.complex128)
    np.multiply(z.real, w.real, out=out.real)
    out.real -= z.imag * w.imag
    np.multiply(z.real, w.imag, out=out.imag)
    out.imag += z.imag * w.real
    return out


# Bounded small: the twiddles of a d_model of 65536 take 8 MB.
@lru_cache(maxsize=4)
def _conjugate_twiddles(turns: Turns, stride: int) -> npt.NDArray[np.complex128]:
    """``conj(w) = cos − i·sin`` of the angles ``k · stride · ω``, ``k < BLOCK``: ``(BLOCK, h)``."""
    sin, cos = sincos(np.arange(0, BLOCK * stride, stride, dtype=np.int64), turns)
    twiddles = np.empty(sin.shape, dtype=np.complex128)
    twiddles.real, twiddles.imag = cos, -sin
    twiddles.flags.writeable = False
    return twiddles


Placer = Callable[[npt.NDArray[np.intp], npt.NDArray[np.intp], Float64Array], None]


def fill_consecutive(
    offset: int,
    count: int,
    turns: Turns,
    place_rows: Callable[[int, Float64Array], None],
    place_values: Placer,
) -> None:
    """Compute positions ``offset … offset+count-1`` and hand them over to be stored.

    ``place_rows(first_row, block)`` receives blocks of shape ``(rows, 2h)`` holding
    ``sin, cos`` of every frequency, interleaved. Values near zero are then recomputed on the
    exact path and handed to ``place_values(rows, float_columns, values)``, in batches.
    Exact super-anchors every ``BLOCK²`` positions are rotated to anchors every ``BLOCK``, and
    those to every position: two rotations from the exact path.
    """
    h = len(turns)
    fine, coarse = _conjugate_twiddles(turns, 1), _conjugate_twiddles(turns, BLOCK)
    span = BLOCK * BLOCK
    supers = _as_z(*sincos(np.arange(offset, offset + count, span, dtype=np.int64), turns))
    per_chunk = max(1, min(BLOCK, _WORKING_PAIRS // (BLOCK * h)))
    rotated = np.empty((per_chunk, BLOCK, h), dtype=np.complex128)
    for index, z_super in enumerate(supers):
        checkpoint()
        anchors = times(z_super, coarse)
        for first in range(0, BLOCK, per_chunk):
            start = index * span + first * BLOCK
            if start >= count:
                break
            part = anchors[first : first + per_chunk]
            block = rotated[: len(part)]
            times(part[:, None, :], fine, out=block)
            values = block.view(np.float64).reshape(-1, 2 * h)
            values = values[: min(len(part) * BLOCK, count - start)]
            place_rows(start, values)
            rows, columns = _small(values)
            # In batches: the exact path holds ~30 temporaries per value.
            for at in range(0, len(rows), _RECOMPUTE):
                batch_rows = rows[at : at + _RECOMPUTE] + start
                batch_columns = columns[at : at + _RECOMPUTE]
                sin, cos = sincos_pairs(
                    offset + batch_rows.astype(np.int64), batch_columns // 2, turns
                )
                place_values(batch_rows, batch_columns, np.where(batch_columns % 2 == 0, sin, cos))


def _small(values: Float64Array) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Rows and float columns where ``|value| < SMALL`` (flat indices: 2-D nonzero is slow)."""
    flat = np.flatnonzero(np.abs(values) < SMALL)
    return np.divmod(flat, values.shape[1])
