"""What computing arrays costs, from parameters alone: the shared units and helpers.

Each scheme's ``cost`` (in its own module) returns a :class:`~posenc.cost.Cost` for ``count``
rows (positions or grid cells) of the chosen ``component`` in ``dtype``: the peak bytes the
computation holds at once, the output included, and its work. The figures are upper bounds read
off tracemalloc and the clock (``tests/api/test_costs.py`` holds the measured peak of every
scheme's table in every format, and of a sample of the other operations, under its declared
cost, so a change that allocates more fails there first). ``SCRATCH`` covers the fixed-size
working blocks that the chunked paths reuse.
"""

from __future__ import annotations

import numpy as np

from posenc.cost import Cost

SCRATCH = 4 * 2**20
# Work units (≈ ns on one core) per output value: the exact path's sin/cos with its angle
# reduction measured 22–37 ns per value here, plain arithmetic 1–5.
TRANSCENDENTAL = 48
ARITHMETIC = 8


def itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def larger(a: Cost, b: Cost) -> Cost:
    return Cost(max(a.bytes, b.bytes), max(a.work, b.work))


def vectors(encoded: Cost, count: int, width: int, rotates: bool) -> Cost:
    """The float64 per-position vectors /similarity compares: their computation (``encoded``,
    the scheme's own float64 cost), the copy kept in the cache, and for a rotary scheme the
    vector tiled, turned and multiplied (three more ``count × width`` float64 arrays)."""
    kept = count * width * 8
    turning = 3 * kept if rotates else 0
    return encoded + Cost(kept + turning, count * width * ARITHMETIC)


def similarity(count: int, width: int, reference: bool, dtype: str) -> Cost:
    """Dot products of ``width``-long rows, then up to six float64 temporaries per value (norms,
    quotient, clipping; or the cancellation mask and square root), then the cast to ``dtype``."""
    values = count if reference else count * count
    return Cost(values * (64 + itemsize(dtype)) + count * 16, values * (width // 4 + 16))
