"""``partial_rotary``: only the first ``r`` dimensions of the head rotate. Seen two ways: the
trailing columns hold the identity (cos 1, sin 0, angle 0), or the frequencies are those of a
wider head ``D`` at the stated base (``ω_i = base^(−2i/D)``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.conformance.rows import Errors, FloatArray, Model, row_width
from posenc.schemes.rope.params import RopeParams
from posenc.verify import row_chunks

# A pass-through block is wrong by more than this (absolute) somewhere.
_IDENTITY_ERROR = 1e-3


def identity_tail(
    stated: Model, array: FloatArray, component: str, n: int, errors: Errors
) -> Finding | None:
    """The last columns of the head never rotate (cos 1, sin 0): the rotary covers only the
    first ``r``. Judged by the block's absolute error, not by the tolerance in ulps. O(n·d)."""
    d = stated.params.d_model
    columns = d // 2 if component == "angle" else d
    still = _still_columns(stated.params, array, component, n, columns)
    held = held_pairs(stated, still, component, errors)
    if held is not None:
        return held
    if stated.params.rotary_pairs is not None:
        return None  # the stated rope holds still pairs itself: it is not the fault named here
    moving = np.flatnonzero(~still)
    first_still = int(moving[-1]) + 1 if len(moving) else 0
    if still[:first_still].any():
        return None  # the still columns are not a tail: not a rotary over the first columns
    rotating = 2 * first_still if component == "angle" else first_still + first_still % 2
    if not 0 < rotating < d:
        return None
    start = rotating // 2 if component == "angle" else rotating
    wrong = errors.abs_by_column[start:columns]
    if component == "cos_sin":
        wrong = np.concatenate([wrong, errors.abs_by_column[d + rotating :]])
    # A slow pair's cos rounds to 1 over a short cache: a pass-through is a wide block (an
    # eighth of the head at least) that is wrong by far more than a rounding.
    if columns - start < max(2, columns // 8) or wrong.max(initial=0.0) <= _IDENTITY_ERROR:
        return None
    return Finding(
        "partial_rotary",
        f"only the first {rotating} of {d} dimensions rotate (partial_rotary_factor "
        f"{rotating / d:g}): the other columns hold the identity; verify the first {rotating} "
        f"columns with d_model={rotating}",
        {
            "rotating_dimensions": rotating,
            "d_model": d,
            "partial_rotary_factor": rotating / d,
            "pass_through_columns": [rotating, d],
        },
    )


def held_pairs(
    stated: Model, still: npt.NDArray[np.bool_], component: str, errors: Errors
) -> Finding | None:
    """``rotary_pairs``: the table's first ``k`` pairs turn as the stated rope's do and the
    others hold still (cos 1, sin 0) — a proportional rope's, exponents over the whole head —
    where the stated rope turns another number of them."""
    params = stated.params
    h = params.d_model // 2
    if component == "angle":
        pairs = [np.array([i]) for i in range(h)]
    elif params.layout == "split":
        pairs = [np.array([i, i + h]) for i in range(h)]
    else:
        pairs = [np.array([2 * i, 2 * i + 1]) for i in range(h)]
    held = np.array([bool(still[columns].all()) for columns in pairs])
    turning = int(np.argmax(held)) if held.any() else h
    stated_pairs = params.rotary_pairs or h
    if turning == stated_pairs or held[turning:].size != held[turning:].sum() or turning == 0:
        return None
    compared = np.concatenate(pairs[: min(turning, stated_pairs)])
    if component == "cos_sin":
        compared = np.concatenate([compared, compared + params.d_model])
    if errors.abs_by_column[compared].max(initial=0.0) > _IDENTITY_ERROR:
        return None  # the pairs that turn are not the stated rope's: another fault
    how = "every pair turns" if turning == h else f"the pairs from {turning} on hold still"
    return Finding(
        "rotary_pairs",
        f"the first {turning} of {h} pairs turn as stated and {how}, where the stated rope "
        f"turns {stated_pairs}: verify with "
        + ("no rotary_pairs" if turning == h else f"rotary_pairs={turning}"),
        {"turning_pairs": turning, "stated_pairs": stated_pairs, "pairs": h},
    )


def _still_columns(
    params: RopeParams, array: FloatArray, component: str, n: int, columns: int
) -> npt.NDArray[np.bool_]:
    """The columns that hold the identity at every position (both planes of ``cos_sin``)."""
    identity = {"cos": 1.0, "sin": 0.0, "angle": 0.0}
    still = np.ones(columns, dtype=bool)
    for rows in row_chunks(n, row_width(params, component)):
        if component == "cos_sin":
            still &= np.all(array[0, rows] == 1.0, axis=0) & np.all(array[1, rows] == 0.0, axis=0)
        else:
            still &= np.all(array[rows] == identity[component], axis=0)
    return still


def wider_head(stated: RopeParams, fitted: RopeParams, where: dict[str, Any]) -> Finding | None:
    """The unscaled frequencies fit a base ``b`` with ``d·ln(base)/ln(b)`` an even head width
    ``D > d``: those of a ``D``-wide head at the stated base, of which ``d`` dimensions rotate."""
    wider = stated.d_model * math.log(stated.base) / math.log(fitted.base)
    if not (
        fitted.scaling == "none"
        and wider > stated.d_model
        and abs(wider - 2 * round(wider / 2)) < 1e-3 * wider
    ):
        return None
    head = 2 * round(wider / 2)
    return Finding(
        "partial_rotary",
        f"the frequencies are those of a {head}-wide head at base {stated.base:g} "
        f"(ω_i = base^(−2i/{head})), of which the first {stated.d_model} dimensions "
        f"rotate: partial rotary with the exponent over the whole head",
        {
            "head_dim": head,
            "rotating_dimensions": stated.d_model,
            "partial_rotary_factor": stated.d_model / head,
            "fitted_base": fitted.base,
            **where,
        },
    )
