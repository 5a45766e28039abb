"""The /verify report of ALiBi: its slopes, and biases linear in the distance.

See :mod:`posenc.checks` for the tolerances and the costs beside each check.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc.checks import (
    FIXED_BYTES,
    FloatArray,
    chunk_values,
    is_consecutive,
)
from posenc.cost import Cost
from posenc.schemes.alibi import maths as alibi
from posenc.verify import (
    Check,
    Report,
    Statistic,
    inapplicable,
    row_chunks,
    unit_roundoff,
)


def verify_alibi(
    params: alibi.AlibiParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Slopes (O(h)), distance-only bias (O(h·n²), by chunks of rows), monotone penalty
    (O(h·n)), on the ``(h, n, n)`` bias of consecutive positions."""
    is_consecutive(positions)
    heads, n = params.num_heads, len(positions)
    u = unit_roundoff(served.dtype)
    checks = [_alibi_slopes(params, served, positions, u)]
    spread = 0.0
    for head in range(heads):
        first = served[head, 0].astype(np.float64)
        for rows in row_chunks(n, n):
            # With consecutive positions the distance |i − j| is the column of the first row.
            distance = np.abs(np.arange(n)[None, :] - np.arange(rows.start, rows.stop)[:, None])
            difference = served[head, rows].astype(np.float64) - first[distance]
            spread = max(spread, float(np.max(np.abs(difference))))
    checks.append(
        Check(
            "distance_only",
            spread == 0.0,
            "max_abs_difference",
            spread,
            0.0,
            "every head's bias is the same for all pairs at one distance |i − j|: every value "
            "equals the first row's value at its distance",
        )
    )
    row = served[:, 0, :].astype(np.float64)  # distances 0, 1, … n−1 in order
    rises = float(np.max(np.diff(row, axis=1))) if n > 1 else 0.0
    checks.append(
        Check(
            "monotone_penalty",
            rises <= 0.0,
            "max_increase_with_distance",
            rises,
            0.0,
            "the bias never grows as the distance grows (row of the first position, every head)",
        )
        if n > 1
        else inapplicable(
            "monotone_penalty", "max_increase_with_distance", 0.0, "one position, one distance"
        )
    )
    stats = (
        Statistic("slope_max", float(alibi.slopes(heads).max()), "the steepest head"),
        Statistic("slope_min", float(alibi.slopes(heads).min()), "the flattest head"),
    )
    return Report(tuple(checks), stats)


def verify_alibi_cost(params: alibi.AlibiParams, n: int) -> Cost:
    values = params.num_heads * n * n
    chunk = chunk_values(n * n, n)
    return Cost(
        8 * values + 6 * 8 * chunk + 16 * n * params.num_heads + FIXED_BYTES,
        30 * values + 1_000_000,
    )


def _alibi_slopes(
    params: alibi.AlibiParams, bias: FloatArray, positions: npt.NDArray[np.int64], u: float
) -> Check:
    n = params.num_heads
    power = 2 ** int(np.floor(np.log2(n)))
    rule = [2.0 ** (-8.0 * (h + 1) / power) for h in range(power)]
    rule += [2.0 ** (-8.0 * (2 * h + 1) / (2 * power)) for h in range(n - power)]
    if len(positions) < 2:
        return inapplicable(
            "slopes", "max_relative_error", u, "one position has no distance to read a slope from"
        )
    step = float(abs(positions[1] - positions[0]))
    measured = -bias[:, 0, 1].astype(np.float64) / step
    error = float(np.max(np.abs(measured / np.array(rule) - 1)))
    kind = (
        "geometric, 2^(-8(h+1)/n)"
        if power == n
        else (f"the {power} geometric slopes, then every other slope of {2 * power} heads")
    )
    return Check(
        "slopes",
        error <= 2 * u,
        "max_relative_error",
        error,
        2 * u,
        f"slopes read off the bias follow the reference rule: {kind}",
    )
