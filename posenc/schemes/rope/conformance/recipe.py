"""``matches_framework_recipe``: the cache is transformers' float32 computation, recognised by
recomputing it operation for operation (:func:`posenc.schemes.rope.framework.encode`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.numerics import float32
from posenc.schemes.rope import framework
from posenc.schemes.rope.conformance.rows import (
    Errors,
    FloatArray,
    Model,
    cache_rows,
    laid_out,
    pair_of_columns,
    row_width,
)
from posenc.schemes.rope.params import RopeParams
from posenc.verify import row_chunks


def _recipe_rows(
    params: RopeParams, component: str, n: int, offset: int, rows: slice
) -> npt.NDArray[np.float32]:
    """transformers' float32 rows (:func:`posenc.schemes.rope.framework.encode`, operation for
    operation) with the sequence length of the whole cache, as
    :func:`~posenc.schemes.rope.conformance.rows.cache_rows` lays them out."""
    recipe = replace(params, recipe="framework")
    inv_freq, attention = framework.frequencies(recipe, offset + n)
    positions = np.arange(offset + rows.start, offset + rows.stop, dtype=np.int64)
    angles = float32.angles(positions, inv_freq)
    if component == "angle":
        return angles
    sin, cos = float32.sincos(angles)
    scale = np.float32(attention)
    cos, sin = (cos * scale).astype(np.float32), (sin * scale).astype(np.float32)
    return laid_out(cos, sin, params.layout, component)


def matches_framework_recipe(
    stated: Model, array: FloatArray, component: str, n: int, errors: Errors
) -> Finding | None:
    """Within 2 ulps (float32's or the cache's, the coarser) of the float32 recipe, in all but
    ``max(2, h/16)`` pairs (torch's ``pow`` is not correctly rounded in a few): O(n·d)."""
    params = stated.params
    if params.freq_factors is not None:  # transformers takes no factor tensor
        return None
    if params.scaling == "dynamic" and params.d_model < 4:
        return None
    width = row_width(params, component)
    worst = np.zeros(width)
    coarse = np.float32 if array.dtype.itemsize >= 4 else array.dtype
    for rows in row_chunks(n, width):
        recipe = _recipe_rows(params, component, n, stated.offset, rows)
        cache = cache_rows(array, component, rows).astype(np.float64)
        spacing = np.spacing(np.abs(recipe).astype(coarse)).astype(np.float64)
        spacing = np.maximum(spacing, float(np.finfo(coarse).smallest_subnormal))
        np.maximum(worst, (np.abs(cache - recipe) / spacing).max(axis=0, initial=0.0), out=worst)
    pairs = pair_of_columns(params, component)
    h = params.d_model // 2
    pair_worst = np.zeros(h)
    np.maximum.at(pair_worst, pairs, worst)
    differing = np.flatnonzero(pair_worst > 2)
    if len(differing) > min(max(2, h // 16), h // 4):
        return None
    return Finding(
        "matches_framework_recipe",
        "the cache is transformers' float32 computation (float32 positions, frequencies and "
        f"angles): up to {errors.max_abs:.3g} from the exact values, beyond the tolerance from "
        f"position {errors.first_bad}",
        {
            "recipe": "framework",
            "max_abs_error_from_exact": errors.max_abs,
            "max_ulp_error_from_exact": errors.max_ulp,
            "exceeds_tolerance_from_position": errors.first_bad,
            "max_ulp_from_recipe": float(pair_worst.max(initial=0.0)),
            "pairs_differing_from_recipe": differing.tolist(),
        },
    )
