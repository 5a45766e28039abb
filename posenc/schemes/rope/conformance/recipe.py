"""``matches_framework_recipe``: the cache is transformers' float32 computation, recognised by
recomputing it operation for operation (:func:`posenc.schemes.rope.recipes.framework.prepare`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from posenc.conformance import Finding
from posenc.schemes.rope.conformance.rows import (
    Errors,
    FloatArray,
    Model,
    cache_rows,
    pair_of_columns,
    recipe_rows,
    row_width,
)
from posenc.schemes.rope.recipes import framework
from posenc.verify import row_chunks


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
    # transformers' rows with the sequence length of the whole cache (a dynamic base's).
    rows_of = framework.prepare(replace(params, recipe="framework"), stated.offset + n)
    for rows in row_chunks(n, width):
        recipe = recipe_rows(rows_of, params.layout, component, stated.offset, rows)
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
