"""The /verify report of the 2-D and 3-D sinusoids: each axis its 1-D table.

See :mod:`posenc.checks` for the tolerances and the costs beside each check.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc.checks import (
    FIXED_BYTES,
    FloatArray,
    chunk_values,
)
from posenc.cost import Cost
from posenc.schemes.grid import maths as grid
from posenc.schemes.sinusoidal.maths import encode as encode_1d
from posenc.verify import (
    Check,
    PairwiseFigures,
    Report,
    bounded,
    pairwise_cost,
    row_chunks,
)


def verify_grid(
    params: grid.GridParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Each axis's block against the 1-D sinusoid of its coordinate: O(n·d), by chunks of
    rows; bounded and the pairwise figures as for every table."""
    worst = 0.0
    blocks = grid.blocks(params)
    for rows in row_chunks(len(positions), params.d_model):
        coords = grid.coordinates(params.grid, positions[rows])
        for axis, channels, one_d in blocks:
            width = channels.stop - channels.start
            expected = encode_1d(one_d, coords[axis], served.dtype.name)[:, :width]  # type: ignore[arg-type]
            difference = served[rows, channels].astype(np.float64) - expected.astype(np.float64)
            worst = max(worst, float(np.max(np.abs(difference))))
    pairwise = PairwiseFigures.of(served, positions)
    axis_blocks = Check(
        "axis_blocks",
        worst == 0.0,
        "max_abs_difference",
        worst,
        0.0,
        f"each block of channels is the 1-D sinusoid of its axis's coordinate "
        f"({params.convention} convention, {len(params.grid)} axes)",
    )
    return Report(
        (axis_blocks, bounded(served), pairwise.unique_positions()), tuple(pairwise.statistics())
    )


def verify_grid_cost(params: grid.GridParams, n: int) -> Cost:
    """``n`` is the number of cells verified (every cell of the grid, for /verify)."""
    d = params.d_model
    chunk = chunk_values(n * d, d)
    # The exact 1-D sinusoid: ~60 units a value (double-double reduction, sin and cos).
    table = Cost(8 * n * d + 16 * 8 * chunk + 400 * d + FIXED_BYTES, 250 * n * d)
    return table + pairwise_cost(n, d)
