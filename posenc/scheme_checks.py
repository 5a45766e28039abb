"""The /verify reports of the schemes beyond the sinusoid, each measured on the served array.

Tolerances use ``u``, the unit roundoff of the served dtype (see :mod:`posenc.sinusoid_verify`
for the reasoning): a value within ``u·|v|`` of the exact one, identities over ``m`` terms
within about ``m·u``.
"""

from __future__ import annotations

import itertools
from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

from posenc import alibi, baselines, grid, rope, t5
from posenc.exact import Turns, decimal_pi
from posenc.verify import (
    Check,
    PairwiseFigures,
    Report,
    Statistic,
    bounded,
    decimal_sin_cos,
    row_to_row_angles,
    ulp_error,
    unit_roundoff,
)

FloatArray = npt.NDArray[np.floating]
_ARITHMETIC = 2.0**-50


def _relative_map(table: npt.NDArray[np.float64]) -> Check:
    """Is there one matrix ``M`` with ``PE(p+1) = M·PE(p)`` for every p? Least squares says."""
    if len(table) < 3:
        return Check(
            "relative_rotation",
            True,
            "max_abs_residual",
            0.0,
            0.0,
            "fewer than three rows: any two rows are related by some matrix",
        )
    before, after = table[:-1], table[1:]
    solution, *_ = np.linalg.lstsq(before, after, rcond=None)
    residual = float(np.max(np.abs(before @ solution - after)))
    scale = max(1.0, float(np.max(np.abs(table))))
    tolerance = 1e-6 * scale
    return Check(
        "relative_rotation",
        residual <= tolerance,
        "max_abs_residual",
        residual,
        tolerance,
        "one linear map takes the encoding of every position to that of the next (best "
        "least-squares map, its largest residual)",
    )


def verify_baseline(
    params: baselines.BaselineParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    table = served.astype(np.float64)
    pairwise = PairwiseFigures.of(table, positions)
    return Report(
        (bounded(table), pairwise.unique_positions(), _relative_map(table)),
        tuple(pairwise.statistics()),
    )


def verify_grid(
    params: grid.GridParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    from posenc.sinusoidal import encode as encode_1d

    coords = grid.coordinates(params.grid, positions)
    worst = 0.0
    for axis, channels, one_d in grid.blocks(params):
        width = channels.stop - channels.start
        expected = encode_1d(one_d, coords[axis], served.dtype.name)[:, :width]  # type: ignore[arg-type]
        worst = max(
            worst,
            float(
                np.max(np.abs(served[:, channels].astype(np.float64) - expected.astype(np.float64)))
            ),
        )
    table = served.astype(np.float64)
    pairwise = PairwiseFigures.of(table, positions)
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
        (axis_blocks, bounded(table), pairwise.unique_positions()), tuple(pairwise.statistics())
    )


def verify_alibi(
    params: alibi.AlibiParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    n = params.num_heads
    u = unit_roundoff(served.dtype)
    bias = served.astype(np.float64)
    checks = [_alibi_slopes(params, bias, positions, u)]
    distance = np.abs(positions[:, None] - positions[None, :])
    spread = 0.0
    for d in np.unique(distance):
        values = bias[:, distance == d]
        spread = max(spread, float(np.max(values.max(axis=1) - values.min(axis=1))))
    checks.append(
        Check(
            "distance_only",
            spread == 0.0,
            "max_spread",
            spread,
            0.0,
            "every head's bias is the same for all pairs at one distance |i − j|",
        )
    )
    order = np.argsort(distance[0], kind="stable")
    row = bias[:, 0, order]
    rises = float(np.max(np.diff(row, axis=1))) if row.shape[1] > 1 else 0.0
    checks.append(
        Check(
            "monotone_penalty",
            rises <= 0.0,
            "max_increase_with_distance",
            rises,
            0.0,
            "the bias never grows as the distance grows (row of the first position, every head)",
        )
    )
    stats = (
        Statistic("slope_max", float(alibi.slopes(n).max()), "the steepest head"),
        Statistic("slope_min", float(alibi.slopes(n).min()), "the flattest head"),
    )
    return Report(tuple(checks), stats)


def _alibi_slopes(
    params: alibi.AlibiParams,
    bias: npt.NDArray[np.float64],
    positions: npt.NDArray[np.int64],
    u: float,
) -> Check:
    n = params.num_heads
    power = 2 ** int(np.floor(np.log2(n)))
    rule = [2.0 ** (-8.0 * (h + 1) / power) for h in range(power)]
    rule += [2.0 ** (-8.0 * (2 * h + 1) / (2 * power)) for h in range(n - power)]
    if len(positions) < 2:
        return Check(
            "slopes",
            True,
            "max_relative_error",
            0.0,
            u,
            "one position: no distance to read a slope from",
        )
    step = float(abs(positions[1] - positions[0]))
    measured = -bias[:, 0, 1] / step
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


def verify_t5(
    params: t5.T5Params, served: npt.NDArray[np.integer], positions: npt.NDArray[np.int64]
) -> Report:
    relative = positions[None, :] - positions[:, None]
    low, high = int(served.min()), int(served.max())
    checks = [
        Check(
            "bucket_range",
            0 <= low and high < params.num_buckets,
            "max_bucket",
            float(high),
            float(params.num_buckets - 1),
            f"every bucket lies in [0, {params.num_buckets})",
        )
    ]
    mixed = 0
    for r in np.unique(relative):
        mixed += int(len(np.unique(served[relative == r])) > 1)
    checks.append(
        Check(
            "relative_only",
            mixed == 0,
            "relative_positions_with_several_buckets",
            float(mixed),
            0.0,
            "the bucket depends on j − i alone",
        )
    )
    by_relative = {int(r): int(served[relative == r][0]) for r in np.unique(relative)}
    backwards = [by_relative[r] for r in sorted(by_relative) if r <= 0][::-1]
    forwards = [by_relative[r] for r in sorted(by_relative) if r >= 0]
    falls = sum(int(b < a) for part in (backwards, forwards) for a, b in itertools.pairwise(part))
    checks.append(
        Check(
            "monotone",
            falls == 0,
            "decreases",
            float(falls),
            0.0,
            "moving away from i, in either direction, the bucket never goes back",
        )
    )
    checks.append(_t5_direction(params, by_relative))
    return Report(
        tuple(checks),
        (Statistic("buckets_used", len(np.unique(served)), "distinct buckets in the table"),),
    )


def _t5_direction(params: t5.T5Params, by_relative: dict[int, int]) -> Check:
    if params.bidirectional:
        half = params.num_buckets // 2
        pairs = [(r, -r) for r in by_relative if r > 0 and -r in by_relative]
        off = sum(int(by_relative[r] != by_relative[m] + half) for r, m in pairs)
        return Check(
            "symmetric",
            off == 0,
            "mismatches",
            float(off),
            0.0,
            f"bucket(r) = bucket(−r) + {half} for r > 0: the same scale both ways",
        )
    future = [b for r, b in by_relative.items() if r > 0]
    off = sum(int(b != 0) for b in future)
    return Check(
        "causal",
        off == 0,
        "future_positions_not_in_bucket_0",
        float(off),
        0.0,
        "unidirectional: every later position j > i falls in bucket 0",
    )


def verify_rope(
    params: rope.RopeParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    u = unit_roundoff(served.dtype)
    cos, sin = served[0].astype(np.float64), served[1].astype(np.float64)
    turns, attention = rope.scaled(params, rope.sequence_length(positions))
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, params.d_model))
    q, k = q / np.linalg.norm(q), k / np.linalg.norm(k)
    rq, rk = (
        rope.rotate_with(params.layout, q, cos, sin),
        rope.rotate_with(params.layout, k, cos, sin),
    )
    d = params.d_model
    inner = rq @ rk.T
    offsets = positions[:, None] - positions[None, :]
    spread = max(float(np.ptp(inner[offsets == o])) for o in np.unique(offsets))
    tolerance = 4 * attention**2 * d * (u + _ARITHMETIC)
    norms = np.linalg.norm(rq, axis=1)
    checks = [
        Check(
            "relative_inner_product",
            spread <= tolerance,
            "max_spread",
            spread,
            tolerance,
            "⟨R_m q, R_n k⟩ for seeded unit q, k is the same for every pair with one m − n",
        ),
        Check(
            "norm_preserving",
            float(np.max(np.abs(norms - attention))) <= tolerance / 2,
            "max_abs_error",
            float(np.max(np.abs(norms - attention))),
            tolerance / 2,
            f"‖R_m q‖ = attention factor ({attention:g}) · ‖q‖ at every position",
        ),
        _rope_frequencies(params, cos, sin, turns.radians, attention, u),
        _rope_rounding(params, served, positions, turns, attention),
    ]
    stats = (
        Statistic("attention_factor", attention, "cos and sin are multiplied by it"),
        Statistic(
            "wavelength_max",
            float(2 * np.pi / turns.radians.min()),
            "longest wavelength after scaling, in positions",
        ),
    )
    return Report(tuple(checks), stats)


def _halves(params: rope.RopeParams, table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return table[:, : params.d_model // 2] if params.layout == "split" else table[:, 0::2]


def _rope_frequencies(
    params: rope.RopeParams,
    cos: npt.NDArray[np.float64],
    sin: npt.NDArray[np.float64],
    omega: npt.NDArray[np.float64],
    attention: float,
    u: float,
) -> Check:
    ordered = bool(np.all(omega > 0) and np.all(np.diff(omega) <= 0))
    c, s = _halves(params, cos), _halves(params, sin)
    if len(c) >= 2:
        measured = row_to_row_angles(s, c)
        error = float(np.max(np.abs(measured - omega)))
        source = "read off consecutive rows of the served cos and sin"
    else:
        error, source = 0.0, "(one row: nothing to read off the table)"
    tolerance = 4 * u / min(attention**2, 1.0) + _ARITHMETIC
    return Check(
        "frequency_range",
        ordered and error <= tolerance,
        "max_abs_error",
        error,
        tolerance,
        f"effective ω_i {source} match the scaled frequencies, which are positive and fall "
        f"from {omega[0]:.6g} to {omega[-1]:.6g}",
    )


def _rope_rounding(
    params: rope.RopeParams,
    served: FloatArray,
    positions: npt.NDArray[np.int64],
    turns: Turns,
    attention: float,
) -> Check:
    rng = np.random.default_rng(0)
    n, d = served.shape[1], served.shape[2]
    picks = [
        (0, 0, 0),
        (1, n - 1, d - 1),
        *zip(
            rng.integers(0, 2, 62).tolist(),
            rng.integers(0, n, 62).tolist(),
            rng.integers(0, d, 62).tolist(),
            strict=True,
        ),
    ]
    exact = []
    with localcontext(prec=60):
        two_pi = 2 * decimal_pi()
        for part, row, column in picks:
            i = column % (d // 2) if params.layout == "split" else column // 2
            omega = (Decimal(float(turns.hi[i])) + Decimal(float(turns.lo[i]))) * two_pi
            sin_value, cos_value = decimal_sin_cos(int(positions[row]) * omega)
            exact.append((cos_value if part == 0 else sin_value) * Decimal(attention))
    values = np.array([served[p, r, c] for p, r, c in picks], dtype=served.dtype)
    worst = ulp_error(values, exact)
    tolerance = 2.0 if served.dtype == np.float64 else 1.0
    return Check(
        "float32_rounding",
        worst <= tolerance,
        "max_ulp_error",
        worst,
        tolerance,
        f"{len(picks)} served cos/sin values against a 50-digit evaluation with the same "
        f"frequencies, in ulps of {served.dtype}",
    )
