"""``matches_recipe``: the cache is a runtime's float32 rope (llama.cpp's ggml, MLX), recognised
by recomputing that runtime's recipe (:mod:`posenc.schemes.rope.recipes`) for the stated rope.

A porter comparing llama.cpp's or MLX's activations with transformers' sees differences of 1e-2
at long context and cannot tell a bug from the recipe: this names the recipe the cache is, and
how far that recipe is from exact. A runtime that does not implement the stated scaling is
not tried; of the runtimes within one ulp of the cache, the closest is named, and the others
listed (at short context ggml's and MLX's tables can agree to the bit).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from posenc.conformance import Finding
from posenc.errors import PosencError
from posenc.schemes.rope import recipes
from posenc.schemes.rope.conformance.rows import (
    Errors,
    FloatArray,
    Model,
    cache_rows,
    recipe_rows,
    row_width,
)
from posenc.schemes.rope.params import RUNTIMES, Runtime
from posenc.verify import row_chunks

NAMES = {"ggml": "llama.cpp's ggml-cpu", "mlx": "MLX's CPU mx.fast.rope with mlx-lm"}


def _largest_ulp(
    stated: Model, runtime: Runtime, array: FloatArray, component: str, n: int
) -> float:
    try:
        # The stated rope as the runtime runs it: a factor tensor is the rope's own (llama.cpp
        # takes it, MLX has no such rope), n_ctx a parameter of recipe=ggml alone.
        factors = stated.params.freq_factors
        if factors is not None and runtime != "ggml":
            return float("inf")
        own = runtime == "ggml" and stated.params.recipe == "ggml"
        params = replace(
            stated.params,
            recipe=runtime,
            framework_precision=None,
            n_ctx=stated.params.n_ctx if own else None,
        )
        rows_of = recipes.prepare(params, stated.offset + n)
    except PosencError:
        return float("inf")  # the runtime has no such rope
    coarse = np.float32 if array.dtype.itemsize >= 4 else array.dtype
    largest = float(np.finfo(coarse).max)
    worst = 0.0
    for rows in row_chunks(n, row_width(params, component)):
        expected = recipe_rows(rows_of, params.layout, component, stated.offset, rows)
        cache = cache_rows(array, component, rows).astype(np.float64)
        magnitude = np.minimum(np.abs(expected), largest)  # float16 angles may pass its range
        spacing = np.spacing(magnitude.astype(coarse)).astype(np.float64)
        spacing = np.maximum(spacing, float(np.finfo(coarse).smallest_subnormal))
        worst = max(worst, float((np.abs(cache - expected) / spacing).max(initial=0.0)))
        if worst > 1:
            break  # not this runtime: no need to read further
    return worst


def matches_runtime_recipe(
    stated: Model, array: FloatArray, component: str, n: int, errors: Errors
) -> Finding | None:
    """Within one ulp (float32's or the cache's, the coarser) of a runtime's recipe at every
    value: O(n·d) per runtime tried."""
    if stated.params.framework_precision is not None or component == "inv_freq":
        return None
    distances = {r: _largest_ulp(stated, r, array, component, n) for r in RUNTIMES}
    matching = sorted((d, r) for r, d in distances.items() if d <= 1)
    if not matching:
        return None
    distance, runtime = matching[0]
    return Finding(
        "matches_recipe",
        f"the cache is {NAMES[runtime]} float32 rope (recipe={runtime}): correct for that "
        f"runtime, up to {errors.max_abs:.3g} from the exact values, beyond the tolerance from "
        f"position {errors.first_bad}",
        {
            "recipe": runtime,
            "also_matches": [other for _, other in matching[1:]],
            "max_abs_error_from_exact": errors.max_abs,
            "max_ulp_error_from_exact": errors.max_ulp,
            "exceeds_tolerance_from_position": errors.first_bad,
            "max_ulp_from_recipe": distance,
        },
    )
