"""The /verify report of the teaching baselines (index, normalized, binary).

See :mod:`posenc.checks` for the tolerances and the costs beside each check.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc.checks import (
    FIXED_BYTES,
    FloatArray,
    chunk_values,
    relative_map,
    relative_map_cost,
)
from posenc.cost import Cost
from posenc.schemes.baselines import maths as baselines
from posenc.verify import (
    PairwiseFigures,
    Report,
    bounded,
    pairwise_cost,
)


def verify_baseline(
    params: baselines.BaselineParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Bounded (O(n·d)), unique positions and the pairwise figures (see
    :class:`~posenc.verify.PairwiseFigures`), and the relative map (O(n·d·min(n, d)))."""
    pairwise = PairwiseFigures.of(served, positions)
    return Report(
        (bounded(served), pairwise.unique_positions(), relative_map(served)),
        tuple(pairwise.statistics()),
    )


def verify_baseline_cost(params: baselines.BaselineParams, n: int) -> Cost:
    d = params.d_model
    table = Cost(8 * n * d + 2 * 8 * chunk_values(n * d, d) + FIXED_BYTES, 4 * n * d)
    return table + pairwise_cost(n, d).peak(relative_map_cost(n, d))
