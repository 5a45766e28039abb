"""The cache and the models it is compared with, row by row: how a model may have built the
cache, its exact rows, and the errors of the cache against them, chunk by chunk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from posenc.conformance import ulp_errors
from posenc.numerics.exact import sincos
from posenc.schemes.rope.maths import ArrayT, expand
from posenc.schemes.rope.params import Layout, RopeParams
from posenc.schemes.rope.recipes.rows import Rows
from posenc.schemes.rope.scaling import scaled
from posenc.verify import row_chunks

FloatArray = npt.NDArray[np.floating]
Float64Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
# A model explains the cache when its largest error is at most this fraction of the stated one.
DECISIVE = 0.1


@dataclass(frozen=True)
class Model:
    """How the cache may have been built: parameters, first position, sin/cos exchanged, and an
    attention factor in place of the scaling's."""

    params: RopeParams
    offset: int
    swapped: bool = False
    attention: float | None = None


@dataclass(frozen=True)
class Errors:
    by_position: Float64Array
    by_column: Float64Array  # largest ulp error of each column of the flattened rows
    abs_by_column: Float64Array  # largest absolute error of each column
    max_abs: float
    max_ulp: float
    mean_ulp: float
    first_bad: int | None


def cache_rows(array: FloatArray, component: str, rows: slice) -> FloatArray:
    """The cache's rows as ``(r, W)`` in its dtype; ``cos_sin`` as cos then sin side by side."""
    if component == "cos_sin":
        return np.concatenate([array[0, rows], array[1, rows]], axis=1)
    return array[rows]


def row_width(params: RopeParams, component: str) -> int:
    return {"cos_sin": 2 * params.d_model, "angle": params.d_model // 2}.get(
        component, params.d_model
    )


def table_length(model: Model, n: int) -> int:
    """The sequence length that sets dynamic and longrope scaling: the end of the table."""
    return model.offset + n


def model_rows(model: Model, component: str, n: int, rows: slice) -> Float64Array:
    """The exact ``(r, W)`` rows of ``model`` in float64, as :func:`cache_rows` lays out the
    cache."""
    turns, attention = scaled(model.params, table_length(model, n))
    if model.attention is not None:
        attention = model.attention
    positions = np.arange(model.offset + rows.start, model.offset + rows.stop, dtype=np.int64)
    if component == "angle":
        result: Float64Array = positions.astype(np.float64)[:, None] * turns.radians
        return result
    sin, cos = sincos(positions, turns)
    if model.swapped:
        cos, sin = sin, cos
    return laid_out(cos * attention, sin * attention, model.params.layout, component)


def recipe_rows(
    rows_of: Rows, layout: Layout, component: str, offset: int, rows: slice
) -> FloatArray:
    """A recipe's rows (:mod:`posenc.schemes.rope.recipes.rows`: transformers' or a runtime's)
    for the cache's ``rows``, laid out as :func:`cache_rows` lays the cache's out."""
    positions = np.arange(offset + rows.start, offset + rows.stop, dtype=np.int64)
    cos, sin, angle = rows_of(positions)
    if component == "angle":
        return angle
    return laid_out(cos, sin, layout, component)


def laid_out(cos: ArrayT, sin: ArrayT, layout: Layout, component: str) -> ArrayT:
    """Rows of cos and sin per pair, ``(r, d/2)``, as :func:`cache_rows` lays out the cache's
    ``component`` (``cos``, ``sin`` or ``cos_sin``), in their own dtype."""
    cos, sin = expand(cos, layout), expand(sin, layout)
    if component == "cos":
        return cos
    return sin if component == "sin" else cast(ArrayT, np.concatenate([cos, sin], axis=1))


def pair_of_columns(params: RopeParams, component: str) -> npt.NDArray[np.intp]:
    """The pair ``i`` each column of :func:`cache_rows` belongs to."""
    h = params.d_model // 2
    if component == "angle":
        return np.arange(h)
    within = np.arange(params.d_model)
    pairs = within % h if params.layout == "split" else within // 2
    return np.tile(pairs, 2) if component == "cos_sin" else pairs


def compare(
    model: Model, array: FloatArray, component: str, n: int, tolerance_ulp: float
) -> Errors:
    """The cache against ``model``'s exact table: O(n·d), chunk by chunk."""
    width = row_width(model.params, component)
    by_position = np.zeros(n)
    by_column, abs_by_column = np.zeros(width), np.zeros(width)
    max_abs, max_ulp, total_ulp = 0.0, 0.0, 0.0
    first_bad: int | None = None
    for rows in row_chunks(n, width):
        cache = cache_rows(array, component, rows)
        exact = model_rows(model, component, n, rows)
        abs_error = np.abs(cache.astype(np.float64) - exact)
        ulps = ulp_errors(cache, exact)
        by_position[rows] = abs_error.max(axis=1, initial=0.0)
        np.maximum(by_column, ulps.max(axis=0, initial=0.0), out=by_column)
        np.maximum(abs_by_column, abs_error.max(axis=0, initial=0.0), out=abs_by_column)
        max_abs = max(max_abs, float(abs_error.max(initial=0.0)))
        row_ulps = ulps.max(axis=1, initial=0.0)
        max_ulp = max(max_ulp, float(row_ulps.max(initial=0.0)))
        with np.errstate(over="ignore"):  # counts near an exact zero may pass float64's range
            total_ulp += float(ulps.sum())
        bad = np.flatnonzero(row_ulps > tolerance_ulp)
        if first_bad is None and len(bad):
            first_bad = model.offset + rows.start + int(bad[0])
    mean_ulp = total_ulp / max(n * width, 1)
    return Errors(by_position, by_column, abs_by_column, max_abs, max_ulp, mean_ulp, first_bad)
