"""Conformance of a client's array: its errors against the served one, and what they mean.

The report types every scheme's conformance returns, and what any scheme can say of an array
(:func:`check_any`): errors by position in absolute terms and in ulps, rows that repeat
(``collapsed_positions``), and ``value_rounding`` when the array is the exact one rounded.
Schemes that know their faults (:mod:`posenc.schemes.sinusoidal.conformance`, rope's) add diagnoses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.verify import duplicate_rows

FloatArray = npt.NDArray[np.floating]


@dataclass(frozen=True)
class Finding:
    name: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conformance:
    max_abs_error: float
    max_ulp_error: float
    first_bad_position: int | None
    error_by_position: list[float]
    diagnosis: tuple[Finding, ...]


def ulp_errors(table: FloatArray, exact: FloatArray) -> FloatArray:
    """``|table − exact|`` in ulps of ``table``'s dtype at the exact value."""
    spacing = np.spacing(np.abs(exact).astype(table.dtype)).astype(np.float64)
    spacing = np.maximum(spacing, float(np.finfo(table.dtype).smallest_subnormal))
    # Near an exact zero the ulp is the smallest subnormal: counts may pass float64's range.
    with np.errstate(over="ignore"):
        errors = np.abs(table.astype(np.float64) - exact) / spacing
    return np.minimum(errors, np.finfo(np.float64).max)


def row_axis(ndim: int) -> int | None:
    """The axis that runs over positions, known from the array's rank alone: first in a table
    ``(n, d)``, second behind a stack (``(2, n, d)`` cos/sin, ``(h, n, n)`` biases); a 1-D array
    (per-head slopes, inverse frequencies) does not depend on position. Never read off the
    lengths: with ``num_heads == seq_len`` or ``seq_len == 2`` two axes have the same one."""
    return {2: 0, 3: 1}.get(ndim)


def check_any(
    exact_of: Callable[[npt.NDArray[np.int64]], npt.NDArray[Any]],
    array: npt.NDArray[Any],
    offset: int,
    count: int,
    tolerance_ulp: float,
) -> Conformance:
    """Compare ``array`` with ``exact_of(positions)`` (float64, same shape) for any scheme.

    Work O(size): one exact array in float64 and a few passes over it. ``collapsed_positions``
    and ``value_rounding`` are the diagnoses every scheme can make.
    """
    positions = np.arange(offset, offset + count, dtype=np.int64)
    exact = exact_of(positions).astype(np.float64, copy=False)
    checkpoint()
    axis = row_axis(array.ndim)
    given, wanted = _rows_first(array, axis, count), _rows_first(exact, axis, count)
    abs_error = np.abs(given.astype(np.float64) - wanted)
    # Integer arrays (T5's buckets) must be equal: their "ulp" is one, and none is tolerated.
    integer = np.issubdtype(array.dtype, np.integer)
    ulps = abs_error if integer else ulp_errors(given, wanted)
    tolerance_ulp = 0.0 if integer else tolerance_ulp
    checkpoint()
    by_position = abs_error.max(axis=1, initial=0.0)
    worst_ulps = ulps.max(axis=1, initial=0.0)
    bad = np.flatnonzero(worst_ulps > tolerance_ulp)
    first_bad = int(positions[bad[0]]) if len(bad) and axis is not None else None
    with np.errstate(over="ignore"):  # errors capped at float64's largest may sum past it
        mean_ulp = min(float(ulps.mean()), float(np.finfo(np.float64).max))
    stated = Stated(by_position, float(worst_ulps.max(initial=0.0)), mean_ulp)
    findings: list[Finding] = []
    if axis is not None:
        collapsed = collapsed_positions(given, positions)
        if collapsed is not None:
            findings.append(collapsed)
    if stated.max_ulp <= tolerance_ulp and not findings:
        findings.append(value_rounding(array, stated))
    return Conformance(
        float(abs_error.max(initial=0.0)),
        stated.max_ulp,
        first_bad,
        by_position.tolist(),
        tuple(findings),
    )


def _rows_first(array: npt.NDArray[Any], axis: int | None, count: int) -> npt.NDArray[Any]:
    if axis is None:
        return array.reshape(1, -1)
    return np.moveaxis(array, axis, 0).reshape(count, -1)


@dataclass(frozen=True)
class Stated:
    """An array against its stated parameters, as a conformance check measured it."""

    error_by_position: FloatArray
    max_ulp: float
    mean_ulp: float


def value_rounding(table: npt.NDArray[Any], stated: Stated) -> Finding:
    return Finding(
        "value_rounding",
        f"every value is the exact one rounded to {table.dtype}: the table is correct",
        {
            "max_ulp_error": stated.max_ulp,
            "mean_ulp_error": stated.mean_ulp,
            "dtype": str(table.dtype),
        },
    )


def collapsed_positions(
    table: npt.NDArray[Any], positions: npt.NDArray[np.int64]
) -> Finding | None:
    """Rows equal to an earlier row: :func:`posenc.verify.duplicate_rows`, O(n·d)."""
    return collapsed_finding(*duplicate_rows(table), positions)


def collapsed_finding(
    earlier: npt.NDArray[np.int64], later: npt.NDArray[np.int64], positions: npt.NDArray[np.int64]
) -> Finding | None:
    """The finding for rows ``later`` equal to rows ``earlier``, with the first examples."""
    if not len(later):
        return None
    examples = [
        [int(positions[a]), int(positions[b])]
        for a, b in zip(earlier[:5].tolist(), later[:5].tolist(), strict=True)
    ]
    return Finding(
        "collapsed_positions",
        f"{len(later)} positions have the same row as an earlier position, first at "
        f"{examples[0][1]}: positions held in a low-precision type",
        {
            "collapsed_rows": len(later),
            "first_collapsed_position": examples[0][1],
            "examples": examples,
        },
    )


def angle_precision(
    table: FloatArray, positions: npt.NDArray[np.int64], error: FloatArray
) -> Finding | None:
    """Error proportional to position: ``error ≈ slope · pos`` where it stands above rounding.

    ``error`` is each row's largest absolute error; O(n).
    """
    floor = float(np.finfo(table.dtype).eps)  # the rounding error of values near 1
    above = (error > 4 * floor) & (error < 0.25) & (positions > 0)
    if above.sum() < max(4, len(table) // 4):
        return None
    p, e = positions[above].astype(np.float64), error[above]
    slope = float(np.sum(e * p) / np.sum(p * p))
    spread = float(np.median(np.abs(e - slope * p)) / np.median(e))
    if spread > 0.5:
        return None
    bits = -math.log2(slope)
    first = int(p[0])
    return Finding(
        "angle_precision",
        f"the error grows linearly with the position (≈ 2^-{bits:.1f} · pos): the angles carry "
        f"about {bits:.0f} bits, as when pos·ω is formed in a {precision_name(bits)}; "
        f"it exceeds the rounding from position {first} on",
        {
            "slope": slope,
            "implied_bits": round(bits, 1),
            "from_position": first,
            "relative_spread_of_fit": spread,
        },
    )


def precision_name(bits: float) -> str:
    if bits < 12:
        return "bfloat16-like precision (8 bits)"
    if bits < 32:
        return "float32-like precision (24 bits)"
    return "float64-like precision"
