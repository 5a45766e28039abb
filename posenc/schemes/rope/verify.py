"""The /verify report of RoPE: frequencies, rounding, and rotation by relative offset.

See :mod:`posenc.checks` for the tolerances and the costs beside each check.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

from posenc.checks import (
    ARITHMETIC,
    FIXED_BYTES,
    ROUNDED_ULPS,
    FloatArray,
    chunk_values,
)
from posenc.cost import Cost
from posenc.numerics.exact import Turns, decimal_pi
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.scaling import scaled
from posenc.verify import (
    CHUNK_ELEMENTS,
    MAX_SHIFTS,
    Check,
    Report,
    Statistic,
    decimal_sin_cos,
    inapplicable,
    row_chunks,
    row_to_row_angles,
    shifts,
    ulp_error,
    unit_roundoff,
)


def verify_rope(params: RopeParams, served: FloatArray, positions: npt.NDArray[np.int64]) -> Report:
    """Relative inner product (O(:data:`MAX_SHIFTS`·n·d)), norm and frequencies (O(n·d)), by
    chunks of rows; rounding on a sample (O(1)). ``served`` is ``(2, n, d)``: cos, then sin."""
    u = unit_roundoff(served.dtype)
    n, d = served.shape[1], params.d_model
    turns, attention = scaled(params, rope.sequence_length(positions))
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
    tolerance = 4 * attention**2 * d * (u + ARITHMETIC)
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
            f"at most {MAX_SHIFTS + 1} rows, else spread geometrically)",
        )
        if n > 1
        else inapplicable(
            "relative_inner_product", "max_spread", tolerance, "one position has no pair"
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
            float(2 * np.pi / turns.radians[: _turning(params)].min()),
            "longest wavelength after scaling, in positions (of the pairs that turn)",
        ),
    )
    return Report(tuple(checks), stats)


def verify_rope_cost(params: RopeParams, n: int) -> Cost:
    d = params.d_model
    values = n * d
    passes = 2 * (min(max(n - 1, 0), MAX_SHIFTS) + 1)
    chunk = chunk_values(values, d)
    held = Cost(8 * 2 * values + 16 * values + 10 * 8 * chunk + 400 * d + FIXED_BYTES, 0)
    work = Cost(
        0,
        values * (150 + 12 * passes) + 2_000 * passes * (values // CHUNK_ELEMENTS + 1) + 30_000_000,
    )
    return held + work


def _turning(params: RopeParams) -> int:
    """The pairs that turn; the others (``rotary_pairs`` on) have frequency 0."""
    return params.d_model // 2 if params.rotary_pairs is None else params.rotary_pairs


def _halves(params: RopeParams, table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return table[:, : params.d_model // 2] if params.layout == "split" else table[:, 0::2]


def _rope_frequencies(
    params: RopeParams,
    served: FloatArray,
    omega: npt.NDArray[np.float64],
    attention: float,
    u: float,
) -> Check:
    """Angles between consecutive rows: O(n·d), by chunks of rows that overlap by one."""
    turning, still = omega[: _turning(params)], omega[_turning(params) :]
    ordered = bool(np.all(turning > 0) and np.all(np.diff(turning) <= 0) and np.all(still == 0))
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
    tolerance = 4 * u / min(attention**2, 1.0) + ARITHMETIC
    return Check(
        "frequency_range",
        ordered and error <= tolerance,
        "max_abs_error",
        error,
        tolerance,
        f"effective ω_i {source} match the scaled frequencies, which are positive and fall "
        f"from {turning[0]:.6g} to {turning[-1]:.6g}"
        + (f", then 0 for the {len(still)} pairs past rotary_pairs" if len(still) else ""),
    )


def _rope_rounding(
    params: RopeParams,
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
        tolerance = ROUNDED_ULPS
    return Check(
        "float32_rounding",
        worst <= tolerance,
        "max_ulp_error",
        worst,
        tolerance,
        f"{len(picks)} served cos/sin values against a 50-digit evaluation with the same "
        f"frequencies, in ulps of {served.dtype}, within the README's bound ({tolerance:.8g} ulp)",
    )
