"""The properties of API.md §6.1, measured on the sinusoidal table the service serves.

Tolerances are built from ``u``, the unit roundoff of the served dtype (2^-24 for float32): the
table's values are each within ``u·|v|`` of the exact ones, so any identity that combines ``m``
of them with weights of size ≤ 1 may be off by about ``m·u``. Float64 terms (2^-50 · scale)
cover the arithmetic of the check itself.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.numerics.exact import sincos
from posenc.schemes.sinusoidal.maths import frequencies_of
from posenc.schemes.sinusoidal.params import SinusoidalParams
from posenc.verify import (
    CHUNK_ELEMENTS,
    MAX_SHIFTS,
    Check,
    PairwiseFigures,
    Report,
    Statistic,
    bounded,
    decimal_sin_cos,
    inapplicable,
    pairwise_cost,
    row_chunks,
    row_to_row_angles,
    shifts,
    ulp_error,
    unit_roundoff,
)

FloatArray = npt.NDArray[np.floating]
_ARITHMETIC = 2.0**-50
_SAMPLES = 96
# README's bound for float32 and float16 tables: one rounding of a value within 2^-48 of the
# exact one (rotation from exact anchors), so at most half an ulp plus 2^-14 ulp.
ROUNDED_ULPS = 0.5 + 2.0**-14
# README's bound for float64 tables (the exact path): NumPy's sin/cos contribute up to 1 ulp.
FLOAT64_ULPS = 1.0


def verify(
    params: SinusoidalParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    """Check the served ``(n, d_model)`` table of ``positions`` (consecutive) against §6.1.

    A fairseq table's padding row is zero by design: it gets a check of its own, and the other
    checks run on the rows after it (or before it, when it is the last).
    """
    padding: list[Check] = []
    if params.padding_idx is not None and params.padding_idx in positions:
        row = int(np.flatnonzero(positions == params.padding_idx)[0])
        largest = float(np.max(np.abs(served[row])))
        after = row + 1 < len(positions)
        padding.append(
            Check(
                "padding_row_zero",
                largest == 0.0,
                "max_abs_value",
                largest,
                0.0,
                f"the row at padding_idx = {params.padding_idx} is zero, as fairseq makes it; the "
                f"other checks use the rows {'after' if after else 'before'} it",
            )
        )
        keep = slice(row + 1, None) if after else slice(0, row)
        served, positions = served[keep], positions[keep]
    if not len(positions):
        return Report(tuple(padding), ())
    report = _verify_rows(params, served, positions)
    return Report((*report.checks, *padding), report.statistics)


def _verify_rows(
    params: SinusoidalParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Report:
    u = unit_roundoff(served.dtype)
    pairwise = PairwiseFigures.of(served, positions)
    turns = frequencies_of(params)
    checks = (
        _formula_equivalence(params, served, positions, u),
        bounded(served),
        pairwise.unique_positions(),
        _constant_norm(params, served, u),
        _relative_rotation(params, served, u),
        _offset_invariant_dot(params, served, u),
        _frequency_range(params, served, u),
        _rounding(params, served, positions),
    )
    wavelengths = 2 * np.pi / turns.radians
    statistics = (
        *pairwise.statistics(),
        Statistic("wavelength_min", float(wavelengths.min()), "2π/ω_0, in positions"),
        Statistic("wavelength_max", float(wavelengths.max()), "2π/ω_(h-1), in positions"),
    )
    return Report(checks, statistics)


def verify_cost(params: SinusoidalParams, n: int) -> Cost:
    """What :func:`verify` holds and does for ``n`` rows, the served table included.

    Bytes: the served table (counted as float64, the widest dtype), a few chunk-sized float64
    temporaries, the pairwise figures' vectors and the frequencies. Work, per value of the
    table (calibrated by ``python -m bench.verify_worst`` at ~1 ns per unit): formula
    equivalence ~150 (two angles, four sines and cosines), the :data:`MAX_SHIFTS` shifted
    passes of relative rotation and the offset-invariant dot ~30 each, the rest ~100; the
    sampled rounding check ~30 ms of Decimal arithmetic.
    """
    d = params.d_model
    values = n * d
    passes = min(max(n - 1, 0), MAX_SHIFTS)
    chunk = min(values, CHUNK_ELEMENTS + d)
    held = Cost(8 * values + 12 * 8 * chunk + 400 * d + 1_000_000, 0)
    chunks = (passes + 2) * (values // CHUNK_ELEMENTS + 1)
    checks = Cost(0, values * (300 + 30 * passes) + 20_000 * chunks)
    rounding = Cost(0, 30_000_000 + 1_000 * d)
    return held + checks + rounding + pairwise_cost(n, d)


def _pairs(table: FloatArray, params: SinusoidalParams) -> tuple[FloatArray, FloatArray]:
    """The sine and cosine columns of the frequencies that have both (``floor(d/2)`` of them)."""
    sines, cosines = params.column_views(table)
    return sines[:, : cosines.shape[1]], cosines


def _interleave_as(params: SinusoidalParams, sin: FloatArray, cos: FloatArray) -> FloatArray:
    out = np.zeros((sin.shape[0], params.d_model))
    sines, cosines = params.column_views(out)
    sines[:], cosines[:] = sin, cos[:, : cosines.shape[1]]
    return out


def _exponents(params: SinusoidalParams) -> npt.NDArray[np.float64]:
    """``e_i`` with ``ω_i = base^(-e_i)``, by the convention's own formula."""
    i = np.arange(params.frequency_count, dtype=np.float64)
    if params.convention == "vaswani":
        return 2.0 * i / params.d_model
    return i / max(params.frequency_count - 1, 1)


def _formula_equivalence(
    params: SinusoidalParams, served: FloatArray, positions: npt.NDArray[np.int64], u: float
) -> Check:
    """Both textbook formulas against every value: O(n·d), by chunks of rows."""
    exponent = _exponents(params)
    divisor, rate = params.base**exponent, np.exp(-exponent * math.log(params.base))
    worst = 0.0
    for block in row_chunks(len(served), params.d_model):
        p = positions[block].astype(np.float64)[:, None]
        table = served[block].astype(np.float64)
        for angle in (p / divisor, p * rate):
            expected = _interleave_as(params, np.sin(angle), np.cos(angle))
            worst = max(worst, float(np.max(np.abs(expected - table))))
    # The two float64 angles are each within a few roundings (2^-50 relative) of the exact one.
    tolerance = u + _ARITHMETIC * max(1.0, float(positions.max()))
    return Check(
        "formula_equivalence",
        worst <= tolerance,
        "max_abs_error",
        worst,
        tolerance,
        "sin(pos / base^e_i) and sin(pos · exp(-e_i·ln base)) (e_i = 2i/d, or i/(h−1) for "
        "tensor2tensor and fairseq), evaluated in float64, both "
        "agree with the served table; the tolerance is the served rounding plus the float64 "
        "angle error, which grows with the position",
    )


def _constant_norm(params: SinusoidalParams, served: FloatArray, u: float) -> Check:
    """``‖PE(p)‖²`` of every row: O(n·d), by chunks of rows."""
    d = params.d_model
    pairs = d // 2
    tolerance = d * (u + _ARITHMETIC)
    if d % 2 and params.convention == "vaswani":
        return inapplicable(
            "constant_norm",
            "max_abs_deviation",
            tolerance,
            "with an odd d_model the last frequency has a sine and no cosine, "
            "so ‖PE(pos)‖² = (d_model−1)/2 + sin²(pos·ω_(h-1)) varies with the position",
        )
    deviation = 0.0
    for block in row_chunks(len(served), d):
        table = served[block].astype(np.float64)
        squares = np.einsum("ij,ij->i", table, table)
        deviation = max(deviation, float(np.max(np.abs(squares - pairs))))
    # ‖v̂‖² − ‖v‖² = Σ (v̂−v)(v̂+v) ≤ 2u·‖v‖² = u·d: the tolerance above.
    detail = "‖PE(pos)‖² = the number of (sin, cos) pairs at every position"
    return Check(
        "constant_norm", deviation <= tolerance, "max_abs_deviation", deviation, tolerance, detail
    )


def _relative_rotation(params: SinusoidalParams, served: FloatArray, u: float) -> Check:
    """Every row against the row ``k`` before it, rotated: O(:data:`MAX_SHIFTS`·n·d)."""
    n = len(served)
    pairs = params.d_model // 2
    ks = shifts(n)
    worst = 0.0
    if pairs and len(ks):
        shift_sin, shift_cos = sincos(ks, frequencies_of(params))
        for k, sk, ck in zip(ks.tolist(), shift_sin[:, :pairs], shift_cos[:, :pairs], strict=True):
            for block in row_chunks(n - k, params.d_model):
                s, c = _pairs(served[block].astype(np.float64), params)
                later = slice(block.start + k, block.stop + k)
                s_k, c_k = _pairs(served[later].astype(np.float64), params)
                worst = max(
                    worst,
                    float(np.max(np.abs(s * ck + c * sk - s_k))),
                    float(np.max(np.abs(c * ck - s * sk - c_k))),
                )
    # Each rotated value combines two served values and is compared with a third: ≤ (1+√2)·u.
    tolerance = 3 * u + _ARITHMETIC
    detail = (
        f"PE(p+k) equals PE(p) rotated by k·ω_i in each of the {pairs} (sin, cos) pairs, "
        f"for every p and {len(ks)} shifts k from 1 to {n - 1} (every shift when there are at "
        f"most {MAX_SHIFTS + 1} rows, else spread geometrically)"
    )
    if not pairs or not len(ks):
        why = "nothing to rotate: " + ("d_model = 1 has no cosine" if not pairs else "one row")
        return inapplicable("relative_rotation", "max_abs_error", tolerance, why)
    return Check("relative_rotation", worst <= tolerance, "max_abs_error", worst, tolerance, detail)


def _offset_invariant_dot(params: SinusoidalParams, served: FloatArray, u: float) -> Check:
    """``PE(p)·PE(p+k)`` over every p for each shift: O(:data:`MAX_SHIFTS`·n·d)."""
    n, d = len(served), params.d_model
    # Each dot product is within u·d of the exact one; a spread is the difference of two.
    tolerance = 2 * d * (u + _ARITHMETIC)
    if d % 2 and params.convention == "vaswani":
        return inapplicable(
            "offset_invariant_dot",
            "max_spread_over_p",
            tolerance,
            "with an odd d_model the sine-only last column adds "
            "sin(p·ω)·sin((p+k)·ω), which depends on p",
        )
    spread = 0.0
    ks = shifts(n)
    for k in ks.tolist():
        low, high = math.inf, -math.inf
        for block in row_chunks(n - k, d):
            later = slice(block.start + k, block.stop + k)
            dots = np.einsum(
                "ij,ij->i", served[block].astype(np.float64), served[later].astype(np.float64)
            )
            low, high = min(low, float(dots.min())), max(high, float(dots.max()))
        spread = max(spread, high - low)
    detail = f"PE(p)·PE(p+k) is the same for every p, for {len(ks)} shifts k"
    if not len(ks):
        return inapplicable("offset_invariant_dot", "max_spread_over_p", tolerance, "one row")
    return Check(
        "offset_invariant_dot", spread <= tolerance, "max_spread_over_p", spread, tolerance, detail
    )


def _frequency_range(params: SinusoidalParams, served: FloatArray, u: float) -> Check:
    """Frequencies read off the table (the angle between consecutive rows) against the law.

    O(n·d), by chunks of rows that overlap by one.
    """
    law = params.base ** -_exponents(params)
    n, pairs = len(served), params.d_model // 2
    if not len(law):
        return inapplicable(
            "frequency_range",
            "max_abs_error",
            0.0,
            "this convention has no frequency at d_model = 1 (a zero column)",
        )
    if n >= 2 and pairs:
        deviation = 0.0
        for block in row_chunks(n - 1, params.d_model):
            s, c = _pairs(served[block.start : block.stop + 1].astype(np.float64), params)
            measured = row_to_row_angles(s, c)
            deviation = max(deviation, float(np.max(np.abs(measured - law[:pairs]))))
        source = "measured as the angle between consecutive rows of the served table"
        tolerance = 4 * u + _ARITHMETIC
    else:
        used = frequencies_of(params).radians
        deviation = float(np.max(np.abs(used - law)))
        source = "of the frequencies behind the table (one row or no cosine: no angle to measure)"
        tolerance = _ARITHMETIC
    wavelengths = 2 * np.pi / law if len(law) else np.array([2 * np.pi])
    spans = wavelengths[0] == 2 * np.pi and wavelengths[-1] <= 2 * np.pi * params.base
    return Check(
        "frequency_range",
        deviation <= tolerance and bool(spans),
        "max_abs_error",
        deviation,
        tolerance,
        f"ω_i {source} follow base^(-e_i) from 1 down to {law[-1]:.6g}; wavelengths run "
        f"from 2π to {wavelengths[-1]:.6g} ≤ 2π·base",
    )


def _rounding(
    params: SinusoidalParams, served: FloatArray, positions: npt.NDArray[np.int64]
) -> Check:
    """:data:`_SAMPLES` values against 50-digit sines: O(d) for the column map, then O(1)."""
    rows, columns = _sample(len(positions), params.d_model)
    frequency_of = _column_frequencies(params)
    steps = params.frequency_count - 1 if params.convention != "vaswani" else None
    with localcontext(prec=60):
        log_base = Decimal(params.base).ln()
        exact = []
        for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
            i, is_cos = frequency_of.get(column, (-1, False))
            if i < 0:  # tensor2tensor's zero column for odd d_model
                exact.append(Decimal(0))
                continue
            exponent = (
                Decimal(2 * i) / params.d_model if steps is None else Decimal(i) / max(steps, 1)
            )
            omega = (-exponent * log_base).exp()
            sin, cos = decimal_sin_cos(int(positions[row]) * omega)
            exact.append(cos if is_cos else sin)
    worst = ulp_error(served[rows, columns], exact)
    tolerance = FLOAT64_ULPS if served.dtype == np.float64 else ROUNDED_ULPS
    return Check(
        "float32_rounding",
        worst <= tolerance,
        "max_ulp_error",
        worst,
        tolerance,
        f"{len(rows)} served {served.dtype} values, from the first and last positions and a "
        "seeded sample in between, against sin/cos evaluated at 50 digits; error in ulps of "
        f"{served.dtype}, within the README's bound ({tolerance:.8g} ulp)",
    )


def _column_frequencies(params: SinusoidalParams) -> dict[int, tuple[int, bool]]:
    """Column → (frequency, is it the cosine), read off the layout's own column views."""
    index = np.arange(params.d_model)[None, :]
    sines, cosines = params.column_views(index)
    mapping = {int(c): (i, False) for i, c in enumerate(sines[0])}
    mapping.update({int(c): (i, True) for i, c in enumerate(cosines[0])})
    return mapping


def _sample(n: int, d: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    rng = np.random.default_rng(0)
    rows = np.concatenate([[0, n - 1], rng.integers(0, n, _SAMPLES - 2)])
    columns = np.concatenate([[0, d - 1], rng.integers(0, d, _SAMPLES - 2)])
    return rows.astype(np.int64), columns.astype(np.int64)
