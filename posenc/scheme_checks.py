"""The /verify reports of the schemes beyond the sinusoid, each measured on the served array.

Tolerances use ``u``, the unit roundoff of the served dtype (see :mod:`posenc.sinusoidal_verify`
for the reasoning): a value within ``u·|v|`` of the exact one, identities over ``m`` terms
within about ``m·u``.

Every check states its work in its docstring and runs in chunks of rows
(:func:`posenc.verify.row_chunks`), so that a cancelled verify stops within one chunk; next to
each ``verify_*`` is its ``verify_*_cost(params, n)``: the bytes it holds at its peak, the
served array included (counted at 8 bytes a value), and its work in units of ~1 ns, calibrated
by ``python -m bench.verify_worst``.
"""

from __future__ import annotations

import itertools
from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

from posenc import alibi, baselines, grid, rope, t5
from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.exact import Turns, decimal_pi
from posenc.sinusoidal import encode as encode_1d
from posenc.verify import (
    CHUNK_ELEMENTS,
    MAX_SHIFTS,
    Check,
    PairwiseFigures,
    Report,
    Statistic,
    bounded,
    decimal_sin_cos,
    pairwise_cost,
    row_chunks,
    row_to_row_angles,
    shifts,
    ulp_error,
    unit_roundoff,
)

FloatArray = npt.NDArray[np.floating]
_ARITHMETIC = 2.0**-50
# Work of one chunk-sized matrix product in the relative map: a few milliseconds.
_PRODUCT_WORK = 2**22
# Directions of the table weaker than this share of the strongest one (in the squared
# singular values of the Gram matrix) count as rounding noise, not as part of its span.
_RANK_RCOND = 1e-10
# README's bound for float32 and float16 values: half an ulp plus 2^-14.
_ROUNDED_ULPS = 0.5 + 2.0**-14
# Fixed overhead of any report: Decimal work, frequency caches, the report's own objects.
_FIXED_BYTES = 1_000_000


def _chunk(values: int, width: int) -> int:
    """Values in one chunk of rows of ``width``: what a chunk-sized temporary holds."""
    return min(values, CHUNK_ELEMENTS + width)


def _is_consecutive(positions: npt.NDArray[np.int64]) -> None:
    if len(positions) > 1 and not np.all(np.diff(positions) == 1):
        raise ValueError("verify checks tables of consecutive positions")


def _relative_map(table: FloatArray) -> Check:
    """Is there one matrix ``M`` with ``PE(p+1) = M·PE(p)`` for every p? Least squares says.

    With ``A`` the rows before and ``B`` the rows after, the best map is ``M = A⁺B``, found
    through the Gram matrix of the smaller side (r = min(n−1, d)): ``AᵀA`` (d × d) when
    ``d < n``, else ``AAᵀ`` ((n−1) × (n−1)), accumulated chunk by chunk, then one r × r
    decomposition; the residual ``max|A·A⁺B − B|`` is then measured on every value.
    O(n·d·r + r³) work, O(r² + r·d) memory beyond the table.
    """
    n, d = table.shape
    if n < 3:
        return Check(
            "relative_rotation",
            True,
            "max_abs_residual",
            0.0,
            0.0,
            "does not apply: fewer than three rows, and any two rows are related by some matrix",
        )
    m = n - 1
    residual = 0.0
    if d <= m:
        gram, cross = np.zeros((d, d)), np.zeros((d, d))
        for block in row_chunks(m, max(d * d // 64, d)):
            a = table[block].astype(np.float64)
            b = table[block.start + 1 : block.stop + 1].astype(np.float64)
            gram += a.T @ a
            cross += a.T @ b
        checkpoint()
        solution = np.linalg.lstsq(gram, cross, rcond=_RANK_RCOND)[0]
        for block in row_chunks(m, max(d * d // 64, d)):
            a = table[block].astype(np.float64)
            b = table[block.start + 1 : block.stop + 1].astype(np.float64)
            residual = max(residual, float(np.max(np.abs(a @ solution - b))))
    else:
        gram = np.zeros((m, m))
        columns = max(1, _PRODUCT_WORK // (m * m))
        for first in range(0, d, columns):
            checkpoint()
            a = table[:m, first : first + columns].astype(np.float64)
            gram += a @ a.T
        checkpoint()
        # A·A⁺ = G·G⁺ with G = AAᵀ: the projection onto the span of A's columns.
        projection = gram @ np.linalg.pinv(gram, rcond=_RANK_RCOND, hermitian=True)
        for first in range(0, d, columns):
            checkpoint()
            b = table[1:, first : first + columns].astype(np.float64)
            residual = max(residual, float(np.max(np.abs(projection @ b - b))))
    scale = 1.0
    for block in row_chunks(n, d):
        scale = max(scale, float(np.max(np.abs(table[block]))))
    tolerance = 1e-6 * scale
    return Check(
        "relative_rotation",
        residual <= tolerance,
        "max_abs_residual",
        residual,
        tolerance,
        "one linear map takes the encoding of every position to that of the next (best "
        "least-squares map, its largest residual over every value)",
    )


def _relative_map_cost(n: int, d: int) -> Cost:
    if n < 3:
        return Cost(0, 0)
    r = min(n - 1, d)
    # Two products over every value against an r-wide side, and one r × r decomposition
    # (an SVD or eigendecomposition: ~100·r³ flops at worst, LAPACK's workspace included).
    return Cost(
        8 * (4 * r * r + 4 * _chunk(n * d, d) + r * min(d, _PRODUCT_WORK)),
        20 * n * d * r + 60 * r**3 + 30 * n * d,
    )


def verify_baseline(
    params: baselines.BaselineParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Bounded (O(n·d)), unique positions and the pairwise figures (see
    :class:`~posenc.verify.PairwiseFigures`), and the relative map (O(n·d·min(n, d)))."""
    pairwise = PairwiseFigures.of(served, positions)
    return Report(
        (bounded(served), pairwise.unique_positions(), _relative_map(served)),
        tuple(pairwise.statistics()),
    )


def verify_baseline_cost(params: baselines.BaselineParams, n: int) -> Cost:
    d = params.d_model
    table = Cost(8 * n * d + 2 * 8 * _chunk(n * d, d) + _FIXED_BYTES, 4 * n * d)
    return table + pairwise_cost(n, d).peak(_relative_map_cost(n, d))


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
    chunk = _chunk(n * d, d)
    # The exact 1-D sinusoid: ~60 units a value (double-double reduction, sin and cos).
    table = Cost(8 * n * d + 16 * 8 * chunk + 400 * d + _FIXED_BYTES, 250 * n * d)
    return table + pairwise_cost(n, d)


def verify_alibi(
    params: alibi.AlibiParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Slopes (O(h)), distance-only bias (O(h·n²), by chunks of rows), monotone penalty
    (O(h·n)), on the ``(h, n, n)`` bias of consecutive positions."""
    _is_consecutive(positions)
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
            "the bias never grows as the distance grows (row of the first position, every head)"
            + ("" if n > 1 else "; does not apply to one position: a single distance"),
        )
    )
    stats = (
        Statistic("slope_max", float(alibi.slopes(heads).max()), "the steepest head"),
        Statistic("slope_min", float(alibi.slopes(heads).min()), "the flattest head"),
    )
    return Report(tuple(checks), stats)


def verify_alibi_cost(params: alibi.AlibiParams, n: int) -> Cost:
    values = params.num_heads * n * n
    chunk = _chunk(n * n, n)
    return Cost(
        8 * values + 6 * 8 * chunk + 16 * n * params.num_heads + _FIXED_BYTES,
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
        return Check(
            "slopes",
            True,
            "max_relative_error",
            0.0,
            u,
            "does not apply to one position: no distance to read a slope from",
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


def verify_t5(
    params: t5.T5Params, served: npt.NDArray[np.integer], positions: npt.NDArray[np.int64]
) -> Report:
    """Bucket range, relative-only buckets and the buckets used (O(n²), by chunks of rows),
    monotone and direction (O(n)), on the ``(n, n)`` buckets of consecutive positions."""
    _is_consecutive(positions)
    n = len(positions)
    # The bucket of each j − i = r, read off the first row (r ≥ 0) and column (r ≤ 0).
    reference = np.concatenate([served[::-1, 0], served[0, 1:]]).astype(np.int64)
    mixed = np.zeros(2 * n - 1, dtype=bool)
    low, high = int(reference.min()), int(reference.max())
    for rows in row_chunks(n, n):
        relative = np.arange(n)[None, :] - np.arange(rows.start, rows.stop)[:, None] + n - 1
        part = served[rows]
        low, high = min(low, int(part.min())), max(high, int(part.max()))
        mixed[relative[part != reference[relative]]] = True
    in_range = 0 <= low and high < params.num_buckets
    checks = [
        Check(
            "bucket_range",
            in_range,
            "max_bucket",
            float(high),
            float(params.num_buckets - 1),
            f"every bucket lies in [0, {params.num_buckets})",
        ),
        Check(
            "relative_only",
            not mixed.any(),
            "relative_positions_with_several_buckets",
            float(mixed.sum()),
            0.0,
            "the bucket depends on j − i alone: every value equals the first row's (j ≥ i) or "
            "first column's (j < i) value at the same j − i",
        ),
    ]
    by_relative = {r - (n - 1): int(b) for r, b in enumerate(reference.tolist())}
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
    checks.append(_t5_direction(params, by_relative, n))
    return Report(
        tuple(checks),
        (
            Statistic(
                "buckets_used",
                _buckets_used(served, in_range, params),
                "distinct buckets in the table",
            ),
        ),
    )


def _buckets_used(served: npt.NDArray[np.integer], in_range: bool, params: t5.T5Params) -> int:
    """Distinct values: counted per chunk of rows (O(n²); sorted only when out of range)."""
    seen = np.zeros(params.num_buckets, dtype=bool)
    others: set[int] = set()
    for rows in row_chunks(len(served), served.shape[1]):
        part = served[rows].ravel()
        if in_range:
            seen |= np.bincount(part, minlength=params.num_buckets).astype(bool)
        else:
            others.update(np.unique(part).tolist())
    return int(seen.sum()) + len(others)


def verify_t5_cost(params: t5.T5Params, n: int) -> Cost:
    values = n * n
    chunk = _chunk(values, n)
    return Cost(
        8 * values + 6 * 8 * chunk + 64 * n + 4 * params.num_buckets + _FIXED_BYTES,
        40 * values + 1_000_000 + 2_000 * n,
    )


def _t5_direction(params: t5.T5Params, by_relative: dict[int, int], n: int) -> Check:
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
            f"bucket(r) = bucket(−r) + {half} for r > 0: the same scale both ways"
            + ("" if n > 1 else "; does not apply to one position: no r > 0"),
        )
    future = [b for r, b in by_relative.items() if r > 0]
    off = sum(int(b != 0) for b in future)
    return Check(
        "causal",
        off == 0,
        "future_positions_not_in_bucket_0",
        float(off),
        0.0,
        "unidirectional: every later position j > i falls in bucket 0"
        + ("" if n > 1 else "; does not apply to one position: no later position"),
    )


def verify_rope(
    params: rope.RopeParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Relative inner product (O(:data:`MAX_SHIFTS`·n·d)), norm and frequencies (O(n·d)), by
    chunks of rows; rounding on a sample (O(1)). ``served`` is ``(2, n, d)``: cos, then sin."""
    u = unit_roundoff(served.dtype)
    n, d = served.shape[1], params.d_model
    turns, attention = rope.scaled(params, rope.sequence_length(positions))
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, d))
    q, k = q / np.linalg.norm(q), k / np.linalg.norm(k)
    rq, rk = np.empty((n, d)), np.empty((n, d))
    for rows in row_chunks(n, d):
        cos, sin = served[0, rows].astype(np.float64), served[1, rows].astype(np.float64)
        rq[rows] = rope.rotate_with(params.layout, q, cos, sin)
        rk[rows] = rope.rotate_with(params.layout, k, cos, sin)
    spread = 0.0
    for shift in [0, *shifts(n).tolist()]:
        # ⟨R_a q, R_(a+s) k⟩ (m − n = −s) and ⟨R_(a+s) q, R_a k⟩ (m − n = s) over every a.
        for left, right in ((rq, rk), (rk, rq)):
            low, high = np.inf, -np.inf
            for rows in row_chunks(n - shift, d):
                later = slice(rows.start + shift, rows.stop + shift)
                inner = np.einsum("ij,ij->i", left[rows], right[later])
                low, high = min(low, float(inner.min())), max(high, float(inner.max()))
            spread = max(spread, high - low)
    tolerance = 4 * attention**2 * d * (u + _ARITHMETIC)
    norm_error = 0.0
    for rows in row_chunks(n, d):
        norms = np.sqrt(np.einsum("ij,ij->i", rq[rows], rq[rows]))
        norm_error = max(norm_error, float(np.max(np.abs(norms - attention))))
    count = len(shifts(n))
    checks = [
        Check(
            "relative_inner_product",
            spread <= tolerance,
            "max_spread",
            spread,
            tolerance,
            "⟨R_m q, R_n k⟩ for seeded unit q, k is the same for every pair with one m − n, "
            f"for m − n = 0 and ±{count} shifts from 1 to {n - 1} (every shift when there are "
            f"at most {MAX_SHIFTS + 1} rows, else spread geometrically)"
            if n > 1
            else "does not apply: one position has no pair of positions",
        ),
        Check(
            "norm_preserving",
            norm_error <= tolerance / 2,
            "max_abs_error",
            norm_error,
            tolerance / 2,
            f"‖R_m q‖ = attention factor ({attention:g}) · ‖q‖ at every position",
        ),
        _rope_frequencies(params, served, turns.radians, attention, u),
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


def verify_rope_cost(params: rope.RopeParams, n: int) -> Cost:
    d = params.d_model
    values = n * d
    passes = 2 * (min(max(n - 1, 0), MAX_SHIFTS) + 1)
    chunk = _chunk(values, d)
    held = Cost(8 * 2 * values + 16 * values + 10 * 8 * chunk + 400 * d + _FIXED_BYTES, 0)
    work = Cost(
        0,
        values * (150 + 12 * passes) + 2_000 * passes * (values // CHUNK_ELEMENTS + 1) + 30_000_000,
    )
    return held + work


def _halves(params: rope.RopeParams, table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return table[:, : params.d_model // 2] if params.layout == "split" else table[:, 0::2]


def _rope_frequencies(
    params: rope.RopeParams,
    served: FloatArray,
    omega: npt.NDArray[np.float64],
    attention: float,
    u: float,
) -> Check:
    """Angles between consecutive rows: O(n·d), by chunks of rows that overlap by one."""
    ordered = bool(np.all(omega > 0) and np.all(np.diff(omega) <= 0))
    n = served.shape[1]
    if n >= 2:
        error = 0.0
        for rows in row_chunks(n - 1, params.d_model):
            pair = slice(rows.start, rows.stop + 1)
            c = _halves(params, served[0, pair].astype(np.float64))
            s = _halves(params, served[1, pair].astype(np.float64))
            error = max(error, float(np.max(np.abs(row_to_row_angles(s, c) - omega))))
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
    """64 values against a 50-digit evaluation: O(1)."""
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
    # float32 and float16: one rounding of a float64 within ~2 float64 ulps of the exact value
    # (README: 0.5 + 2^-14 ulp). float64: NumPy's sin/cos (≤ 1 ulp, README), and when the
    # attention factor is not 1 the product with it rounds once more (0.5 ulp).
    if served.dtype == np.float64:
        tolerance = 1.0 if attention == 1.0 else 1.5
    else:
        tolerance = _ROUNDED_ULPS
    return Check(
        "float32_rounding",
        worst <= tolerance,
        "max_ulp_error",
        worst,
        tolerance,
        f"{len(picks)} served cos/sin values against a 50-digit evaluation with the same "
        f"frequencies, in ulps of {served.dtype}, within the README's bound ({tolerance:.8g} ulp)",
    )
