"""What computing each scheme's array costs, from its parameters alone.

Each function returns a :class:`~posenc.cost.Cost` for ``count`` rows (positions or grid cells)
of the chosen ``component`` in ``dtype``: the peak bytes the computation holds at once, the
output included, and its work. The figures are upper bounds read off tracemalloc and the clock
(``tests/api/test_costs.py`` holds every operation's measured peak under its declared cost, so a
change that allocates more fails there first). ``_SCRATCH`` covers the fixed-size working
blocks that the chunked paths reuse.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from posenc import rope as rope_scheme
from posenc import sinusoidal as sinusoidal_scheme
from posenc.cost import Cost

_SCRATCH = 4 * 2**20
# Work units (≈ ns on one core) per output value: the exact path's sin/cos with its angle
# reduction measured 22–37 ns per value here, plain arithmetic 1–5.
_TRANSCENDENTAL = 48
_ARITHMETIC = 8


def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def _larger(a: Cost, b: Cost) -> Cost:
    return Cost(max(a.bytes, b.bytes), max(a.work, b.work))


def sinusoidal(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A table by the compiled loops (:func:`posenc.sinusoidal.table_cost`), or listed
    positions in blocks of fixed size straight into the output: whichever costs more."""
    values = count * params.d_model
    listed = Cost(values * _itemsize(dtype) + _SCRATCH, values * _TRANSCENDENTAL)
    return _larger(sinusoidal_scheme.table_cost(params, count, dtype), listed)  # type: ignore[arg-type]


def grid(params: Any, count: int, dtype: str, component: str) -> Cost:
    """One float64 1-D table per axis block beside the output."""
    values = count * params.d_model
    return Cost(values * (_itemsize(dtype) + 8) + _SCRATCH, values * _TRANSCENDENTAL)


def baseline(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A float64 table, then its cast."""
    values = count * params.d_model
    return Cost(values * (_itemsize(dtype) + 8) + _SCRATCH, values * _ARITHMETIC)


def rope(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A table by the compiled loops (:func:`posenc.rope.table_cost`), or sin and cos of every
    (position, pair) in float64, scaled, expanded and stacked (measured 69 bytes per
    ``count·d_model`` at the peak): whichever costs more. The frequencies alone (``inv_freq``)
    cost nothing that grows with ``count``."""
    if component == "inv_freq":
        return Cost(params.d_model * 16 + _SCRATCH, params.d_model * 30_000)
    pairs = count * params.d_model
    listed = Cost(pairs * 80 + _SCRATCH, pairs * _TRANSCENDENTAL)
    return _larger(rope_scheme.table_cost(params, count, dtype, component), listed)


def alibi(params: Any, count: int, dtype: str, component: str) -> Cost:
    """The output, and three float64-sized ``(n, n)`` matrices: the differences, the distances,
    and the one head's product in flight."""
    if component == "slopes":
        return Cost(params.num_heads * 64 + _SCRATCH, params.num_heads * _TRANSCENDENTAL)
    values = params.num_heads * count * count
    return Cost(values * _itemsize(dtype) + count * count * 32 + _SCRATCH, values * 16)


def t5(params: Any, count: int, dtype: str, component: str) -> Cost:
    """The int32 output, and the int64 and float32 temporaries of one block of rows (measured
    53 bytes per value of the block)."""
    values = count * count
    return Cost(values * 4 + min(values, 2**18) * 64 + _SCRATCH, values * 24)


def vectors(encoded: Cost, count: int, width: int, rotates: bool) -> Cost:
    """The float64 per-position vectors /similarity compares: their computation (``encoded``,
    the scheme's own float64 cost), the copy kept in the cache, and for a rotary scheme the
    vector tiled, turned and multiplied (three more ``count × width`` float64 arrays)."""
    kept = count * width * 8
    turning = 3 * kept if rotates else 0
    return encoded + Cost(kept + turning, count * width * _ARITHMETIC)


def similarity(count: int, width: int, reference: bool, dtype: str) -> Cost:
    """Dot products of ``width``-long rows, then up to six float64 temporaries per value (norms,
    quotient, clipping; or the cancellation mask and square root), then the cast to ``dtype``."""
    values = count if reference else count * count
    return Cost(values * (64 + _itemsize(dtype)) + count * 16, values * (width // 4 + 16))
