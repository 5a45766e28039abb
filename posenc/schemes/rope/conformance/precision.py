"""Findings of precision: the values rounded to the dtype (``value_rounding``), the angles
rounded (``angle_precision``), the positions rounded until rows repeat
(``collapsed_positions``)."""

from __future__ import annotations

import numpy as np

from posenc.conformance import Finding, collapsed_finding
from posenc.conformance import angle_precision as growing_with_position
from posenc.schemes.rope.conformance.rows import Errors, FloatArray, IntArray, pair_of_columns
from posenc.schemes.rope.params import RopeParams
from posenc.verify import CHUNK_ELEMENTS, duplicate_rows

# Fewer bits than this in the angles is a wrong frequency rather than a low precision.
_FEWEST_BITS = 7.0


def angle_precision(
    params: RopeParams,
    component: str,
    array: FloatArray,
    positions: IntArray,
    errors: Errors,
) -> list[Finding]:
    """Error ∝ position (:func:`posenc.conformance.angle_precision`), largest in a fast pair.

    A rounded angle ``pos·ω`` errs by ``~2^-b·pos·ω``: most in the fastest pairs. A wrong slow
    frequency (a scaling) also grows with the position, but in the slow pairs.
    """
    h = params.d_model // 2
    by_pair = np.zeros(h)
    np.maximum.at(by_pair, pair_of_columns(params, component), errors.abs_by_column)
    if int(np.argmax(by_pair)) >= max(1, h // 4):
        return []
    finding = growing_with_position(array, positions, errors.by_position)
    # A slope above 2^-7 is a wrong frequency, not a precision: bfloat16 angles give ~2^-9.
    if finding is None or finding.evidence["implied_bits"] < _FEWEST_BITS:
        return []
    return [finding]


def value_rounding(array: FloatArray, errors: Errors) -> Finding:
    return Finding(
        "value_rounding",
        f"every value is the exact one rounded to {array.dtype}: the cache is correct",
        {
            "max_ulp_error": errors.max_ulp,
            "mean_ulp_error": errors.mean_ulp,
            "dtype": str(array.dtype),
        },
    )


def collapsed_positions(array: FloatArray, component: str, positions: IntArray) -> Finding | None:
    """Rows equal to an earlier row (both planes of ``cos_sin``): O(n·d)."""
    first = array[0] if component == "cos_sin" else array
    earlier, later = duplicate_rows(first)
    if component == "cos_sin" and len(later):
        same = np.ones(len(later), dtype=bool)
        step = max(1, CHUNK_ELEMENTS // max(array.shape[2], 1))
        for start in range(0, len(later), step):
            at = slice(start, start + step)
            same[at] = np.all(array[1][earlier[at]] == array[1][later[at]], axis=1)
        earlier, later = earlier[same], later[same]
    return collapsed_finding(earlier, later, positions)
