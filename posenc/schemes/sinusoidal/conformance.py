"""What is wrong with a sinusoid table a client built: compare it with the exact one and name
the fault.

Each finding is claimed only with evidence measured on the client's table:

- ``layout_mismatch`` — the other layout, or sine and cosine exchanged, fits far better;
- ``base_mismatch`` — the frequencies read off the table follow another base (fitted);
- ``angle_precision`` — the error grows in proportion to the position, as when the angle
  ``pos·ω`` is formed in a low precision: float32 gives ~2^-24·pos·ω, bfloat16 ~2^-8·pos·ω;
- ``collapsed_positions`` — distinct positions with identical rows (positions held in a
  low-precision type);
- ``value_rounding`` — the error is the dtype's rounding and nothing more: the table is fine.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from posenc.conformance import (
    Conformance,
    Finding,
    Stated,
    angle_precision,
    collapsed_positions,
    ulp_errors,
    value_rounding,
)
from posenc.cost import Cost
from posenc.schemes.sinusoidal.maths import encode
from posenc.schemes.sinusoidal.params import SinusoidalParams
from posenc.verify import CHUNK_ELEMENTS, row_chunks, row_to_row_angles

FloatArray = npt.NDArray[np.floating]
# An alternative explains the table when it fits this many times better than the stated one.
_DECISIVE = 100.0
# A fitted base counts as different when it is off by more than this relative amount.
_BASE_TOLERANCE = 1e-3


def check(
    params: SinusoidalParams, table: FloatArray, offset: int, tolerance_ulp: float = 1.0
) -> Conformance:
    """Compare a client's ``(n, d_model)`` table of positions ``offset …`` with the exact one.

    Work O(n·d): the exact table is computed and compared chunk by chunk of rows, never held
    whole; the diagnosis adds at most five more such passes (three layouts, a fitted base, the
    angle error at it), the frequencies read off consecutive rows (O(n·d), held) and the
    search for repeated rows (:func:`posenc.verify.duplicate_rows`, O(n·d)). Memory: the
    client's table, the frequency readings (2 × 4·n·d bytes) and chunk-sized temporaries;
    :func:`conformance_cost` states both.
    """
    positions = np.arange(offset, offset + len(table), dtype=np.int64)
    by_position = np.zeros(len(table))
    max_abs, max_ulp, total_ulp = 0.0, 0.0, 0.0
    first_bad: int | None = None
    for rows in row_chunks(len(table), params.d_model):
        exact = encode(params, positions[rows], "float64")
        abs_error = np.abs(table[rows].astype(np.float64) - exact)
        ulps = ulp_errors(table[rows], exact)
        by_position[rows] = abs_error.max(axis=1, initial=0.0)
        max_abs = max(max_abs, float(abs_error.max(initial=0.0)))
        max_ulp = max(max_ulp, float(ulps.max(initial=0.0)))
        total_ulp += float(ulps.sum())
        bad = np.flatnonzero(ulps.max(axis=1, initial=0.0) > tolerance_ulp)
        if first_bad is None and len(bad):
            first_bad = int(positions[rows][bad[0]])
    stated = Stated(by_position, max_ulp, total_ulp / max(table.size, 1))
    diagnosis = _diagnose(params, table, positions, stated, tolerance_ulp)
    return Conformance(max_abs, max_ulp, first_bad, by_position.tolist(), diagnosis)


def conformance_cost(params: SinusoidalParams, n: int, d: int) -> Cost:
    """What :func:`check` holds and does for an ``(n, d)`` table, the table included.

    Bytes: the table (counted at 8 bytes a value, the widest dtype), the angles read off it and
    their median's copy (2 × 4·n·d), per-position vectors, a dozen chunk-sized float64
    temporaries and the answer's error list. Work: six passes of the exact encoding (~100 units
    a value each, calibrated with ``python -m bench.verify_worst``) and ~150 a value for the
    rest.
    """
    values = n * d
    chunk = min(values, CHUNK_ELEMENTS + d)
    held = 8 * values + 2 * 4 * values + 8 * 8 * n + 16 * 8 * chunk + 400 * d + 1_000_000
    chunks = 8 * (values // CHUNK_ELEMENTS + 1)
    return Cost(held, 1200 * values + 300 * n + 20_000 * chunks)


def _max_ulps(
    params: SinusoidalParams,
    table: FloatArray,
    positions: npt.NDArray[np.int64],
    swapped: bool = False,
) -> float:
    """Largest ulp error of ``table`` against ``params``' exact table, chunk by chunk: O(n·d)."""
    worst = 0.0
    for rows in row_chunks(len(table), params.d_model):
        exact = encode(params, positions[rows], "float64")
        if swapped:
            exact = _swap_sin_cos(exact, params)
        worst = max(worst, float(ulp_errors(table[rows], exact).max(initial=0.0)))
    return worst


def _errors_by_position(
    params: SinusoidalParams, table: FloatArray, positions: npt.NDArray[np.int64]
) -> FloatArray:
    """``max |table − exact|`` of each row: O(n·d), chunk by chunk."""
    errors = np.zeros(len(table))
    for rows in row_chunks(len(table), params.d_model):
        exact = encode(params, positions[rows], "float64")
        difference = np.abs(table[rows].astype(np.float64) - exact)
        errors[rows] = difference.max(axis=1, initial=0.0)
    return errors


def _diagnose(
    params: SinusoidalParams,
    table: FloatArray,
    positions: npt.NDArray[np.int64],
    stated: Stated,
    tolerance_ulp: float,
) -> tuple[Finding, ...]:
    findings: list[Finding] = []
    collapsed = collapsed_positions(table, positions)
    if collapsed is not None:
        findings.append(collapsed)
    if stated.max_ulp <= tolerance_ulp:
        if not findings:
            findings.append(value_rounding(table, stated))
        return tuple(findings)
    layout = _layout_mismatch(params, table, positions, stated.max_ulp)
    if layout is not None:
        return (*findings, layout)
    base = _base_mismatch(params, table, positions, stated.max_ulp)
    errors = stated.error_by_position
    if base is not None:
        findings.append(base)
        fitted = float(base.evidence["fitted_base"])
        errors = _errors_by_position(replace(params, base=fitted), table, positions)
    if collapsed is None:
        angle = angle_precision(table, positions, errors)
        if angle is not None:
            findings.append(angle)
    return tuple(findings)


def _alternatives(params: SinusoidalParams) -> list[tuple[str, SinusoidalParams, bool]]:
    other = "split" if params.layout == "interleaved" else "interleaved"
    return [
        (f"{other} layout", replace(params, layout=other), False),  # type: ignore[arg-type]
        (f"{params.layout} layout with sin and cos exchanged", params, True),
        (f"{other} layout with sin and cos exchanged", replace(params, layout=other), True),  # type: ignore[arg-type]
    ]


def _layout_mismatch(
    params: SinusoidalParams, table: FloatArray, positions: npt.NDArray[np.int64], stated: float
) -> Finding | None:
    """The three other layouts against the table: O(3·n·d)."""
    best: tuple[float, str] | None = None
    for label, alternative, swapped in _alternatives(params):
        error = _max_ulps(alternative, table, positions, swapped)
        if best is None or error < best[0]:
            best = (error, label)
    if best is None or best[0] * _DECISIVE > stated:
        return None
    return Finding(
        "layout_mismatch",
        f"the table matches the {best[1]}, not the stated {params.layout} layout",
        {
            "matches": best[1],
            "max_ulp_error_as_matched": best[0],
            "max_ulp_error_as_stated": stated,
        },
    )


def _swap_sin_cos(table: FloatArray, params: SinusoidalParams) -> FloatArray:
    """Exchange each frequency's sine and cosine (an odd d_model's last sine stays)."""
    swapped = table.copy()  # a chunk of rows
    pairs = params.d_model // 2
    if params.layout == "interleaved":
        sines, cosines = slice(0, 2 * pairs, 2), slice(1, 2 * pairs, 2)
    else:
        h = params.frequency_count
        sines, cosines = slice(0, pairs), slice(h, h + pairs)
    swapped[:, sines], swapped[:, cosines] = table[:, cosines], table[:, sines]
    return swapped


def _measured_frequencies(
    params: SinusoidalParams, table: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """ω_i read off consecutive rows (the median over rows), and how far each reading can be
    trusted (absolute). O(n·d) work; the angles are held in float32 (n·d/2 values), which
    keeps each reading to 2^-24 relative, far inside the 1 % the fit uses."""
    pairs = params.d_model // 2
    angles = np.empty((len(table) - 1, pairs), dtype=np.float32)
    for rows in row_chunks(len(table) - 1, params.d_model):
        values = table[rows.start : rows.stop + 1].astype(np.float64)
        if params.layout == "interleaved":
            s, c = values[:, 0 : 2 * pairs : 2], values[:, 1::2]
        else:
            h = params.frequency_count
            s, c = values[:, :pairs], values[:, h : h + pairs]
        angles[rows] = row_to_row_angles(s, c)
    noise = 4 * float(np.finfo(table.dtype).eps)
    return np.median(angles, axis=0).astype(np.float64), np.full(pairs, noise)


def _base_mismatch(
    params: SinusoidalParams, table: FloatArray, positions: npt.NDArray[np.int64], stated: float
) -> Finding | None:
    if len(table) < 2 or params.d_model < 4:
        return None
    omega, noise = _measured_frequencies(params, table)
    i = np.arange(len(omega))
    # ln base = −ln ω_i · d / 2i, from frequencies measured to better than 1 % (and i > 0).
    usable = (i > 0) & (omega > 100 * noise) & (omega < np.pi)
    if not usable.any():
        return None
    estimates = -np.log(omega[usable]) * params.d_model / (2 * i[usable])
    fitted = float(np.exp(np.median(estimates)))
    if not (1.0 < fitted <= 1e12) or abs(math.log(fitted / params.base)) < _BASE_TOLERANCE:
        return None
    fitted = float(f"{fitted:.4g}")
    as_fitted = _max_ulps(replace(params, base=fitted), table, positions)
    if as_fitted * _DECISIVE > stated and as_fitted > 1e3:
        return None
    return Finding(
        "base_mismatch",
        f"the frequencies fit base {fitted:g}, not the stated {params.base:g}",
        {
            "fitted_base": fitted,
            "stated_base": params.base,
            "columns_used": int(usable.sum()),
            "max_ulp_error_at_fitted_base": as_fitted,
            "max_ulp_error_as_stated": stated,
        },
    )
