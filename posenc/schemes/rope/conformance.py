"""What is wrong with a client's rope cache: compare it with the exact one and name the fault.

The cache is a component of :mod:`.maths` for positions ``offset … offset + n − 1``:
``cos_sin`` ``(2, n, d)`` (cos, then sin), ``cos`` or ``sin`` ``(n, d)``, or ``angle``
``(n, d/2)``. Each finding is claimed from evidence measured on the cache, and only when the
cache is not already within ``tolerance_ulp`` of the exact table:

- ``matches_framework_recipe`` — every value within 2 float32 ulps of transformers' float32
  recipe (:func:`.framework.encode`) in all but ``max(2, h/16)`` pairs (torch's
  ``pow`` is not correctly rounded in a few); the other findings then stay silent;
- ``partial_rotary`` — the trailing columns do not rotate (cos 1, sin 0, angle 0), or the
  frequencies are those of a wider head ``D`` at the stated base (``ω_i = base^(−2i/D)``);
- ``layout_mismatch`` — the cache repeats its values as the other layout does, or (read by the
  sense of rotation, or by the error) holds sin where cos belongs;
- ``base_mismatch`` / ``scaling_mismatch`` — the frequencies ``ω̂_i`` read off the cache fit
  another base, scaling, factor or original length (fitted in ``ln ω`` within the reading's
  noise);
- ``attention_factor_mismatch`` — the amplitude ``√(cos² + sin²)`` is another constant;
- ``offset_mismatch`` — the phases of the first row are those of another position;
- ``angle_precision`` — the error left grows in proportion to the position;
- ``collapsed_positions`` — distinct positions share a row;
- ``value_rounding`` — the cache conforms: its error is the dtype's rounding.

The fitted findings (swap, base, scaling, attention, offset) are reported only when the model
they make together explains the cache: its largest error at most a tenth of the stated one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Conformance, Finding, angle_precision, ulp_errors
from posenc.cost import Cost
from posenc.errors import ParameterError
from posenc.numerics import float32
from posenc.numerics.exact import sincos
from posenc.schemes.rope import framework
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import Layout, RopeParams
from posenc.schemes.rope.scaling import scaled
from posenc.verify import CHUNK_ELEMENTS, duplicate_rows, row_chunks

FloatArray = npt.NDArray[np.floating]
Float64Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
COMPONENTS = ("cos_sin", "cos", "sin", "angle")
# A model explains the cache when its largest error is at most this fraction of the stated one.
_DECISIVE = 0.1
# The scaling factors and original context lengths tried when the stated ones do not fit.
_FACTORS = (1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 16.0, 20.0, 32.0, 40.0, 64.0)
_ORIGINALS = (2048, 4096, 8192, 32768)
# A reading of ln ω_i is trusted to this; a fit must agree with every trusted reading.
_LOG_FLOOR = 1e-5
_USABLE = 1e-2
# Offsets searched: candidate positions of the slowest pair, and pairs on the phase ladder.
_MAX_CANDIDATES = 1 << 14
_LADDER = 32
_PHASE_TOLERANCE = 1e-2
_MAX_POSITION = 2**31
# Fewer bits than this in the angles is a wrong frequency rather than a low precision.
_FEWEST_BITS = 7.0
# A pass-through block is wrong by more than this (absolute) somewhere.
_IDENTITY_ERROR = 1e-3


@dataclass(frozen=True)
class _Model:
    """How the cache may have been built: parameters, first position, sin/cos exchanged, and an
    attention factor in place of the scaling's."""

    params: RopeParams
    offset: int
    swapped: bool = False
    attention: float | None = None


@dataclass(frozen=True)
class _Errors:
    by_position: Float64Array
    by_column: Float64Array  # largest ulp error of each column of the flattened rows
    abs_by_column: Float64Array  # largest absolute error of each column
    max_abs: float
    max_ulp: float
    mean_ulp: float
    first_bad: int | None


@dataclass(frozen=True)
class _Reading:
    """What the cache says about itself, in the frame (layout, swap) it was found to use."""

    omega: Float64Array  # ω̂_i, NaN where unreadable
    relative_noise: Float64Array  # how far each ln ω̂_i can be trusted
    amplitude: float | None
    first_phases: list[Float64Array]  # the first row's angle mod 2π, each possible reading


def check(
    params: RopeParams,
    array: FloatArray,
    component: str,
    offset: int = 0,
    tolerance_ulp: float = 1.0,
) -> Conformance:
    """Compare a client's rope cache of positions ``offset …`` with the exact one and diagnose it.

    ``array`` is ``(2, n, d)`` for ``cos_sin`` (cos then sin), ``(n, d)`` for ``cos``/``sin``,
    ``(n, d/2)`` for ``angle``; errors are per position, the largest over its values, in
    absolute terms and in ulps of ``array``'s dtype at the exact value.

    Work O(n·d): the exact table is computed chunk by chunk of rows, never held whole, for the
    stated parameters and for at most three more models (sin/cos exchanged, transformers'
    float32 recipe, the fitted model); the frequencies are read in one more pass; repeated rows
    are found by :func:`posenc.verify.duplicate_rows`. The fits themselves work on the ``d/2``
    frequencies: about 700 candidate spectra of O(d) each. Memory: the client's array, O(n)
    per-position vectors and chunk-sized temporaries; :func:`conformance_cost` states both.

    >>> p = RopeParams(d_model=8, base=500000.0)
    >>> cache = rope.table(p.__class__(d_model=8), 64, 0, "float32", "cos_sin")
    >>> [f.name for f in check(p, cache, "cos_sin").diagnosis]
    ['base_mismatch']
    """
    if component not in COMPONENTS:
        raise ParameterError("component", f"must be one of {', '.join(COMPONENTS)}")
    if array.ndim < 2 or array.shape != rope.shape(params, _count(array, component), component):
        expected = rope.shape(params, 0, component)
        raise ParameterError(
            "data",
            f"must have shape {_shape_text(expected)} for component={component}, "
            f"got {tuple(array.shape)}",
        )
    n = _count(array, component)
    stated = _Model(params, offset)
    errors = _errors(stated, array, component, n, tolerance_ulp)
    diagnosis = _diagnose(stated, array, component, n, errors, tolerance_ulp)
    return Conformance(
        errors.max_abs, errors.max_ulp, errors.first_bad, errors.by_position.tolist(), diagnosis
    )


def conformance_cost(params: RopeParams, n: int, component: str) -> Cost:
    """What :func:`check` holds and does for a cache of ``n`` positions, the cache included.

    Bytes: the cache (counted at 8 bytes a value, the widest dtype), ten per-position float64
    vectors (errors, row hashes), 16 chunk-sized float64 temporaries, the answer's error list
    and the 60-digit frequencies of up to four models. Work: up to six passes over the values
    (exact sin/cos, comparison; measured 25–340 ns a value in all, declared 400), the 60-digit
    frequencies of four models (30 000 units each), ~700 candidate spectra (~60 units a
    frequency each) and ~30 000 units a chunk.
    """
    h = params.d_model // 2
    values = math.prod(rope.shape(params, n, component))
    width = values // max(n, 1)
    chunk = min(values, max(CHUNK_ELEMENTS, width) + width)
    held = 8 * values + 10 * 8 * n + 16 * 8 * chunk + 40 * n + 4 * 1024 * h + 2_000_000
    chunks = 8 * (values // CHUNK_ELEMENTS + 1)
    work = 400 * values + 4 * 30_000 * h + 700 * (60 * h + 3_000) + 30_000 * chunks
    return Cost(held, work + 200 * n)


def _count(array: FloatArray, component: str) -> int:
    return int(array.shape[1] if component == "cos_sin" else array.shape[0])


def _shape_text(expected: tuple[int, ...]) -> str:
    return "(" + ", ".join("n" if size == 0 else str(size) for size in expected) + ")"


# --- the cache and the models, row by row ---------------------------------------------------


def _rows(array: FloatArray, component: str, rows: slice) -> FloatArray:
    """The cache's rows as ``(r, W)`` in its dtype; ``cos_sin`` as cos then sin side by side."""
    if component == "cos_sin":
        return np.concatenate([array[0, rows], array[1, rows]], axis=1)
    return array[rows]


def _width(params: RopeParams, component: str) -> int:
    return {"cos_sin": 2 * params.d_model, "angle": params.d_model // 2}.get(
        component, params.d_model
    )


def _length(model: _Model, n: int) -> int:
    """The sequence length that sets dynamic and longrope scaling: the end of the table."""
    return model.offset + n


def _model_rows(model: _Model, component: str, n: int, rows: slice) -> Float64Array:
    """The exact ``(r, W)`` rows of ``model`` in float64, as :func:`_rows` lays out the cache."""
    turns, attention = scaled(model.params, _length(model, n))
    if model.attention is not None:
        attention = model.attention
    positions = np.arange(model.offset + rows.start, model.offset + rows.stop, dtype=np.int64)
    if component == "angle":
        result: Float64Array = positions.astype(np.float64)[:, None] * turns.radians
        return result
    sin, cos = sincos(positions, turns)
    layout = model.params.layout
    cos, sin = _expand(cos * attention, layout), _expand(sin * attention, layout)
    if model.swapped:
        cos, sin = sin, cos
    return {"cos": cos, "sin": sin}.get(component, np.concatenate([cos, sin], axis=1))


def _expand(half: Float64Array, layout: str) -> Float64Array:
    if layout == "split":
        return np.concatenate([half, half], axis=1)
    return np.repeat(half, 2, axis=1)


def _errors(
    model: _Model, array: FloatArray, component: str, n: int, tolerance_ulp: float
) -> _Errors:
    """The cache against ``model``'s exact table: O(n·d), chunk by chunk."""
    width = _width(model.params, component)
    by_position = np.zeros(n)
    by_column, abs_by_column = np.zeros(width), np.zeros(width)
    max_abs, max_ulp, total_ulp = 0.0, 0.0, 0.0
    first_bad: int | None = None
    for rows in row_chunks(n, width):
        cache = _rows(array, component, rows)
        exact = _model_rows(model, component, n, rows)
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
    return _Errors(by_position, by_column, abs_by_column, max_abs, max_ulp, mean_ulp, first_bad)


# --- the diagnosis ---------------------------------------------------------------------------


def _diagnose(
    stated: _Model,
    array: FloatArray,
    component: str,
    n: int,
    errors: _Errors,
    tolerance_ulp: float,
) -> tuple[Finding, ...]:
    if errors.max_ulp <= tolerance_ulp:
        # Rows equal in a conforming cache are equal in the exact table too (float16, d = 2).
        return (_value_rounding(array, errors),)
    findings: list[Finding] = []
    positions = np.arange(stated.offset, stated.offset + n, dtype=np.int64)
    collapsed = _collapsed_positions(array, component, positions)
    if collapsed is not None:
        findings.append(collapsed)
    recipe = _matches_framework_recipe(stated, array, component, n, errors)
    if recipe is not None:
        findings.append(recipe)
        if collapsed is None:
            findings.extend(_angle(stated.params, component, array, positions, errors))
        return tuple(findings)
    partial = _identity_tail(stated, array, component, n, errors, tolerance_ulp)
    if partial is not None:
        return (*findings, partial)
    layout, layout_finding = _layout(stated, array, component, n)
    if layout_finding is not None:
        findings.append(layout_finding)
    frame = replace(stated, params=replace(stated.params, layout=layout))
    swapped = _swapped(frame, array, component, n)
    framed = replace(frame, swapped=swapped)
    reading = _read(framed, array, component, n)
    fitted, fitted_findings = _fit(framed, reading, component, n, array.dtype)
    if swapped:
        fitted_findings.insert(0, _swap_finding(component, layout))
    model = fitted
    if fitted != frame:
        as_fitted = _errors(model, array, component, n, tolerance_ulp)
        if as_fitted.max_abs > _DECISIVE * errors.max_abs:
            # The fits do not explain the cache: keep only what the structure showed.
            fitted_findings, as_fitted = [], errors
        else:
            for k, finding in enumerate(fitted_findings):
                evidence = {
                    **finding.evidence,
                    "max_abs_error_as_fitted": as_fitted.max_abs,
                    "max_abs_error_as_stated": errors.max_abs,
                }
                fitted_findings[k] = replace(finding, evidence=evidence)
    elif layout == stated.params.layout:
        as_fitted = errors
    else:
        as_fitted = _errors(model, array, component, n, tolerance_ulp)
    findings.extend(fitted_findings)
    if collapsed is None and as_fitted.max_ulp > tolerance_ulp:
        findings.extend(_angle(model.params, component, array, positions, as_fitted))
    return tuple(findings)


def _angle(
    params: RopeParams,
    component: str,
    array: FloatArray,
    positions: IntArray,
    errors: _Errors,
) -> list[Finding]:
    """Error ∝ position (:func:`posenc.conformance.angle_precision`), largest in a fast pair.

    A rounded angle ``pos·ω`` errs by ``~2^-b·pos·ω``: most in the fastest pairs. A wrong slow
    frequency (a scaling) also grows with the position, but in the slow pairs.
    """
    h = params.d_model // 2
    by_pair = np.zeros(h)
    np.maximum.at(by_pair, _pair_of_columns(params, component), errors.abs_by_column)
    if int(np.argmax(by_pair)) >= max(1, h // 4):
        return []
    finding = angle_precision(array, positions, errors.by_position)
    # A slope above 2^-7 is a wrong frequency, not a precision: bfloat16 angles give ~2^-9.
    if finding is None or finding.evidence["implied_bits"] < _FEWEST_BITS:
        return []
    return [finding]


def _value_rounding(array: FloatArray, errors: _Errors) -> Finding:
    return Finding(
        "value_rounding",
        f"every value is the exact one rounded to {array.dtype}: the cache is correct",
        {
            "max_ulp_error": errors.max_ulp,
            "mean_ulp_error": errors.mean_ulp,
            "dtype": str(array.dtype),
        },
    )


def _collapsed_positions(array: FloatArray, component: str, positions: IntArray) -> Finding | None:
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


# --- transformers' float32 recipe ------------------------------------------------------------


def _recipe_rows(
    params: RopeParams, component: str, n: int, offset: int, rows: slice
) -> npt.NDArray[np.float32]:
    """transformers' float32 rows (:func:`.framework.encode`, operation for
    operation) with the sequence length of the whole cache, as :func:`_rows` lays them out."""
    recipe = replace(params, recipe="framework")
    inv_freq, attention = framework.frequencies(recipe, offset + n)
    positions = np.arange(offset + rows.start, offset + rows.stop, dtype=np.int64)
    angles = float32.angles(positions, inv_freq)
    if component == "angle":
        return angles
    sin, cos = float32.sincos(angles)
    scale = np.float32(attention)
    cos = _expand((cos * scale).astype(np.float32), params.layout).astype(np.float32)
    sin = _expand((sin * scale).astype(np.float32), params.layout).astype(np.float32)
    return {"cos": cos, "sin": sin}.get(component, np.concatenate([cos, sin], axis=1))


def _pair_of_columns(params: RopeParams, component: str) -> npt.NDArray[np.intp]:
    """The pair ``i`` each column of :func:`_rows` belongs to."""
    h = params.d_model // 2
    if component == "angle":
        return np.arange(h)
    within = np.arange(params.d_model)
    pairs = within % h if params.layout == "split" else within // 2
    return np.tile(pairs, 2) if component == "cos_sin" else pairs


def _matches_framework_recipe(
    stated: _Model, array: FloatArray, component: str, n: int, errors: _Errors
) -> Finding | None:
    """Within 2 ulps (float32's or the cache's, the coarser) of the float32 recipe: O(n·d)."""
    params = stated.params
    if params.scaling == "dynamic" and params.d_model < 4:
        return None
    width = _width(params, component)
    worst = np.zeros(width)
    coarse = np.float32 if array.dtype.itemsize >= 4 else array.dtype
    for rows in row_chunks(n, width):
        recipe = _recipe_rows(params, component, n, stated.offset, rows)
        cache = _rows(array, component, rows).astype(np.float64)
        spacing = np.spacing(np.abs(recipe).astype(coarse)).astype(np.float64)
        spacing = np.maximum(spacing, float(np.finfo(coarse).smallest_subnormal))
        np.maximum(worst, (np.abs(cache - recipe) / spacing).max(axis=0, initial=0.0), out=worst)
    pairs = _pair_of_columns(params, component)
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
            "max_abs_error_from_exact": errors.max_abs,
            "max_ulp_error_from_exact": errors.max_ulp,
            "exceeds_tolerance_from_position": errors.first_bad,
            "max_ulp_from_recipe": float(pair_worst.max(initial=0.0)),
            "pairs_differing_from_recipe": differing.tolist(),
        },
    )


# --- structure: partial rotation, layout, sin and cos exchanged --------------------------------


def _identity_tail(
    stated: _Model, array: FloatArray, component: str, n: int, errors: _Errors, tolerance: float
) -> Finding | None:
    """The last columns of the head never rotate (cos 1, sin 0): the rotary covers only the
    first ``r``. O(n·d)."""
    d = stated.params.d_model
    columns = d // 2 if component == "angle" else d
    identity = {"cos": 1.0, "sin": 0.0, "angle": 0.0}
    del tolerance  # the identity block is judged by its absolute error, see below
    still = np.ones(columns, dtype=bool)
    for rows in row_chunks(n, _width(stated.params, component)):
        if component == "cos_sin":
            still &= np.all(array[0, rows] == 1.0, axis=0) & np.all(array[1, rows] == 0.0, axis=0)
        else:
            still &= np.all(array[rows] == identity[component], axis=0)
    moving = np.flatnonzero(~still)
    first_still = int(moving[-1]) + 1 if len(moving) else 0
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


def _duplicated(params: RopeParams, array: FloatArray, component: str, n: int, layout: str) -> bool:
    """Every value written twice as ``layout`` expands cos and sin."""
    h = params.d_model // 2
    for rows in row_chunks(n, _width(params, component)):
        for plane in (array[0, rows], array[1, rows]) if component == "cos_sin" else (array[rows],):
            first, second = (
                (plane[:, :h], plane[:, h:])
                if layout == "split"
                else (plane[:, 0::2], plane[:, 1::2])
            )
            if not np.array_equal(first, second):
                return False
    return True


def _layout(
    stated: _Model, array: FloatArray, component: str, n: int
) -> tuple[Layout, Finding | None]:
    layout = stated.params.layout
    if component == "angle" or stated.params.d_model == 2:
        return layout, None
    if _duplicated(stated.params, array, component, n, layout):
        return layout, None
    other: Layout = "interleaved" if layout == "split" else "split"
    if not _duplicated(stated.params, array, component, n, other):
        return layout, None
    name = {"split": "split (rotate_half)", "interleaved": "interleaved (GPT-J, every two)"}
    return other, Finding(
        "layout_mismatch",
        f"the cache repeats cos and sin as the {name[other]} layout does, not the stated "
        f"{name[layout]} layout",
        {"matches": other, "stated": layout, "evidence": f"every value equals its {other} twin"},
    )


def _swapped(frame: _Model, array: FloatArray, component: str, n: int) -> bool:
    """Is sin where cos belongs? For ``cos_sin`` the sense of rotation says: cos then sin turn
    forward with the position, sin then cos backward. For ``cos``/``sin`` alone only the error
    against the other function can say, when nothing else is wrong. O(n·d)."""
    if component == "angle":
        return False
    if component == "cos_sin" and n >= 2:
        h, d = frame.params.d_model // 2, frame.params.d_model
        columns = np.arange(h) if frame.params.layout == "split" else np.arange(0, d, 2)
        turned = 0.0
        for rows in row_chunks(n - 1, 2 * d):
            block = slice(rows.start, rows.stop + 1)
            c = array[0, block][:, columns].astype(np.float64)
            s = array[1, block][:, columns].astype(np.float64)
            turned += float(np.sum(s[1:] * c[:-1] - c[1:] * s[:-1]))
        return turned < 0
    other = _Model(frame.params, frame.offset, swapped=True)
    as_swapped = _errors(other, array, component, n, 0.0).max_abs
    as_stated = _errors(frame, array, component, n, 0.0).max_abs
    return as_swapped <= _DECISIVE * as_stated


def _swap_finding(component: str, layout: str) -> Finding:
    what = (
        "the first plane holds sin and the second cos"
        if component == "cos_sin"
        else (f"the cache holds {'sin' if component == 'cos' else 'cos'}, not {component}")
    )
    return Finding(
        "layout_mismatch",
        f"sin and cos are exchanged: {what}",
        {"matches": f"{layout} layout with sin and cos exchanged", "stated": layout},
    )


# --- what the cache says about its frequencies, amplitude and first position -----------------


def _halves(
    frame: _Model, array: FloatArray, component: str, rows: slice
) -> tuple[Float64Array, Float64Array | None]:
    """One value of each pair, ``(r, d/2)`` in float64: (cos, sin), (cos|sin, None) or (angle,
    None), in the frame's layout and swap."""
    d = frame.params.d_model
    pick = slice(0, d // 2) if frame.params.layout == "split" else slice(0, d, 2)
    if component == "angle":
        return array[rows].astype(np.float64), None
    if component == "cos_sin":
        first = array[0, rows][:, pick].astype(np.float64)
        second = array[1, rows][:, pick].astype(np.float64)
        return (second, first) if frame.swapped else (first, second)
    return array[rows][:, pick].astype(np.float64), None


def _read(frame: _Model, array: FloatArray, component: str, n: int) -> _Reading:
    """ω̂_i, the amplitude and the first row's phases, in one pass: O(n·d).

    - cos and sin: ``ω̂ = Σ_p arg(z_{p+1}·z̄_p) / (n−1)`` with ``z = cos + i·sin`` (a sum that
      telescopes to the phase turned end to end), noise from the spread of the steps;
      amplitude the mean of ``|z|``;
    - cos or sin alone: ``x_{p+1} + x_{p−1} = 2·cos ω · x_p`` for any phase and amplitude, so
      ``cos ω̂ = Σ x_p (x_{p+1} + x_{p−1}) / 2Σ x_p²`` (least squares, noise from its
      residuals), and ``A² = x_p² + ((x_{p+1} − x_{p−1}) / 2 sin ω)²`` at the best-conditioned
      pair;
    - angles: ``ω̂ = (θ_last − θ_first) / (n − 1)``, noise the dtype's rounding of the angles.
    """
    h = frame.params.d_model // 2
    eps = float(np.finfo(array.dtype).eps)
    first, second = _halves(frame, array, component, slice(0, 1))
    nan = np.full(h, np.nan)
    if component == "angle":
        last, _ = _halves(frame, array, component, slice(n - 1, n))
        if n < 2:
            return _Reading(nan, nan, None, [first[0]])
        omega = (last[0] - first[0]) / (n - 1)
        largest = np.maximum(np.abs(last[0]), np.abs(first[0]))
        noise = 2 * eps * largest / (n - 1) / np.maximum(np.abs(omega), 1e-300)
        return _Reading(omega, noise, None, [first[0]])
    if component == "cos_sin":
        return _read_pairs(frame, array, component, n, first, second, eps)
    return _read_single(frame, array, component, n, first, eps)


def _read_pairs(
    frame: _Model,
    array: FloatArray,
    component: str,
    n: int,
    first: Float64Array,
    second: Float64Array | None,
    eps: float,
) -> _Reading:
    assert second is not None
    h = frame.params.d_model // 2
    turned, squares, amplitude = np.zeros(h), np.zeros(h), 0.0
    for rows in row_chunks(n, 2 * frame.params.d_model):
        c, s = _halves(frame, array, component, slice(rows.start, min(rows.stop + 1, n)))
        assert s is not None
        amplitude += float(
            np.sqrt(c[: rows.stop - rows.start] ** 2 + s[: rows.stop - rows.start] ** 2).sum()
        )
        steps = np.arctan2(s[1:] * c[:-1] - c[1:] * s[:-1], c[1:] * c[:-1] + s[1:] * s[:-1])
        turned += steps.sum(axis=0)
        squares += (steps**2).sum(axis=0)
    phases = [np.arctan2(second[0], first[0])]
    mean_amplitude = amplitude / (n * h)
    if n < 2:
        return _Reading(np.full(h, np.nan), np.full(h, np.nan), mean_amplitude, phases)
    omega = turned / (n - 1)
    spread = np.sqrt(np.maximum(squares / (n - 1) - omega**2, 0.0))
    noise = 3 * np.maximum(spread, eps) / (n - 1) / np.maximum(np.abs(omega), 1e-300)
    return _Reading(omega, noise, mean_amplitude, phases)


def _read_single(
    frame: _Model, array: FloatArray, component: str, n: int, first: Float64Array, eps: float
) -> _Reading:
    h = frame.params.d_model // 2
    sxx, sxy, syy, sdd = np.zeros(h), np.zeros(h), np.zeros(h), np.zeros(h)
    centres = 0
    for rows in row_chunks(n, frame.params.d_model):
        block = slice(max(rows.start - 1, 0), min(rows.stop + 1, n))
        x, _ = _halves(frame, array, component, block)
        centre, around, difference = x[1:-1], x[2:] + x[:-2], x[2:] - x[:-2]
        sxx += (centre**2).sum(axis=0)
        sxy += (centre * around).sum(axis=0)
        syy += (around**2).sum(axis=0)
        sdd += (difference**2).sum(axis=0)
        centres += len(centre)
    nan = np.full(h, np.nan)
    if centres == 0:
        return _Reading(nan, nan, None, [])
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.clip(sxy / (2 * sxx), -1.0, 1.0)
        residual = np.maximum(syy - sxy**2 / sxx, 0.0)
        cosine_noise = np.maximum(
            0.5 * np.sqrt(residual / (centres * sxx)), eps / math.sqrt(centres)
        )
    omega = np.arccos(cosine)
    sine = np.sin(omega)
    with np.errstate(divide="ignore", invalid="ignore"):
        noise = 3 * cosine_noise / sine / omega
    noise = np.where(np.isfinite(noise), noise, np.inf)
    amplitude = None
    best = int(np.nanargmax(np.where(sxx > 0, sine, np.nan))) if np.any(sxx > 0) else None
    if best is not None and sine[best] > 0.2:
        amplitude = math.sqrt((sxx[best] + sdd[best] / (4 * sine[best] ** 2)) / centres)
    phases: list[Float64Array] = []
    if amplitude is not None:
        ratio = np.clip(first[0] / amplitude, -1.0, 1.0)
        if component == "cos":
            phases = [np.arccos(ratio), -np.arccos(ratio)]
        else:
            phases = [np.arcsin(ratio), np.pi - np.arcsin(ratio)]
    return _Reading(omega, noise, amplitude, phases)


# --- fits: frequencies, attention factor, first position --------------------------------------


def _spectrum(params: RopeParams, length: int) -> Float64Array:
    """A candidate's frequencies by transformers' float32 recipe: fast, and 2^-24 from exact,
    far inside what a reading can tell apart."""
    inv_freq, _ = framework.frequencies(replace(params, recipe="framework"), length)
    return inv_freq.astype(np.float64)


def _misfit(reading: _Reading, usable: npt.NDArray[np.bool_], omega: Float64Array) -> float:
    """The largest ``|ln ω̂ − ln ω|`` over trusted readings, in units of their noise."""
    tolerance = np.maximum(20 * reading.relative_noise[usable], _LOG_FLOOR)
    with np.errstate(divide="ignore", invalid="ignore"):
        deviation = np.abs(np.log(reading.omega[usable]) - np.log(omega[usable]))
    result = float(np.max(deviation / tolerance, initial=0.0))
    return result if math.isfinite(result) else math.inf


def _with(params: RopeParams, **changes: Any) -> RopeParams:
    """``params`` with another scaling (its own fields only) or another base."""
    scaling = changes.get("scaling", params.scaling)
    if scaling == params.scaling:
        return replace(params, **changes)
    return RopeParams(
        d_model=params.d_model,
        base=changes.get("base", params.base),
        layout=params.layout,
        scaling=scaling,
        factor=changes.get("factor"),
        original_max_position_embeddings=changes.get("original_max_position_embeddings"),
    )


def _shortest(value: float, fits: Any) -> float:
    """The value with the fewest significant digits that still fits."""
    for digits in range(1, 10):
        rounded = float(f"{value:.{digits}g}")
        if fits(rounded):
            return rounded
    return value


def _candidates(
    params: RopeParams, reading: _Reading, usable: npt.NDArray[np.bool_], length: int
) -> Iterator[RopeParams]:
    """Parameters that may have built the cache, simplest first."""
    d = params.d_model
    i = np.arange(d // 2, dtype=np.float64)
    log_omega = np.log(reading.omega[usable])
    at = i[usable]
    bases = [params.base]
    # ln ω_i = −ln f − (2i/d)·ln base: a line through the trusted readings.
    if usable.sum() >= 2 and np.ptp(at) > 0:
        slope, intercept = np.polyfit(at, log_omega, 1)
        if slope < 0:
            fitted = math.exp(-slope * d / 2)
            bases.append(fitted)
            if 1.0 < fitted <= 1e12 and abs(intercept) > _LOG_FLOOR:
                yield _with(params, scaling="linear", factor=math.exp(-intercept), base=fitted)
    if (at > 0).any():
        origin = at > 0  # through the origin: the unscaled spectrum, base alone
        bases.append(math.exp(float(np.median(-log_omega[origin] * d / (2 * at[origin])))))
    bases = [b for b in bases if 1.0 < b <= 1e12]
    for base in bases[1:]:
        yield replace(params, base=base)
    for base in bases:
        yield _with(params, scaling="none", base=base)
    unscaled = _spectrum(_with(params, scaling="none"), length)
    lowest = np.flatnonzero(usable)
    if len(lowest):
        ratio = float(unscaled[lowest[-1]] / reading.omega[lowest[-1]])
        if 0 < ratio <= 1e6:
            yield _with(params, scaling="linear", factor=ratio)
    factors = sorted({*_FACTORS, *([params.factor] if params.factor else [])})
    originals = (
        (params.original_max_position_embeddings,)
        if params.original_max_position_embeddings
        else _ORIGINALS
    )
    for scaling in ("llama3", "yarn", "dynamic"):
        if scaling == "dynamic" and d < 4:
            continue
        for base in bases[:1]:
            for original in originals:
                for factor in factors:
                    yield _with(
                        params,
                        scaling=scaling,
                        base=base,
                        factor=factor,
                        original_max_position_embeddings=original,
                    )


def _fit(
    frame: _Model, reading: _Reading, component: str, n: int, dtype: np.dtype[Any]
) -> tuple[_Model, list[Finding]]:
    """The model that the frequencies, amplitude and first row read off the cache fit best."""
    params, length = frame.params, _length(frame, n)
    findings: list[Finding] = []
    with np.errstate(invalid="ignore"):
        usable = (
            np.isfinite(reading.omega) & (reading.omega > 0) & (reading.relative_noise < _USABLE)
        )
    fitted = params
    if usable.any() and _misfit(reading, usable, _spectrum(params, length)) > 1:
        best: tuple[int, float, RopeParams] | None = None
        for candidate in _valid(_candidates(params, reading, usable, length)):
            misfit = _misfit(reading, usable, _spectrum(candidate, length))
            changes = _changes(params, candidate)
            if misfit <= 1 and (best is None or (changes, misfit) < best[:2]):
                best = (changes, misfit, candidate)
        if best is not None:
            fitted = _rounded(best[2], reading, usable, length)
            findings.extend(_spectrum_findings(params, fitted, usable))
    model = replace(frame, params=fitted)
    expected = framework.frequencies(replace(fitted, recipe="framework"), length)[1]
    if reading.amplitude is not None and component != "angle":
        eps = float(np.finfo(dtype).eps)
        if abs(reading.amplitude - expected) > max(16 * eps, 1e-4) * max(expected, 1.0):
            factor = float(f"{reading.amplitude:.6g}")
            model = replace(model, attention=reading.amplitude)
            findings.append(_attention_finding(factor, expected))
    offset = _fit_offset(model, reading, component, n)
    if offset is not None and offset != frame.offset:
        model = replace(model, offset=offset)
        findings.append(
            Finding(
                "offset_mismatch",
                f"the cache starts at position {offset}, not at the stated {frame.offset}",
                {
                    "fitted_offset": offset,
                    "stated_offset": frame.offset,
                    "shift": offset - frame.offset,
                },
            )
        )
    return model, findings


def _valid(candidates: Iterator[RopeParams]) -> Iterator[RopeParams]:
    """The candidates that are valid parameters (a fitted factor may fall out of range)."""
    while True:
        try:
            yield next(candidates)
        except StopIteration:
            return
        except ParameterError:
            continue


def _changes(stated: RopeParams, candidate: RopeParams) -> int:
    scaling = (
        candidate.scaling != stated.scaling
        or candidate.factor != stated.factor
        or candidate.original_max_position_embeddings != stated.original_max_position_embeddings
    )
    return int(candidate.base != stated.base) + int(scaling)


def _rounded(
    params: RopeParams, reading: _Reading, usable: npt.NDArray[np.bool_], length: int
) -> RopeParams:
    """Fitted base and factor with the fewest digits that still fit the readings."""

    def fits(candidate: RopeParams) -> bool:
        return _misfit(reading, usable, _spectrum(candidate, length)) <= 1

    base = _shortest(params.base, lambda b: 1.0 < b <= 1e12 and fits(replace(params, base=b)))
    params = replace(params, base=base)
    if params.factor is not None:
        factor = _shortest(params.factor, lambda f: f > 0 and fits(replace(params, factor=f)))
        params = replace(params, factor=factor)
    return params


def _spectrum_findings(
    stated: RopeParams, fitted: RopeParams, usable: npt.NDArray[np.bool_]
) -> list[Finding]:
    findings = []
    pairs = np.flatnonzero(usable)
    where = {"pairs_read": [int(pairs[0]), int(pairs[-1])], "pairs_count": len(pairs)}
    if fitted.base != stated.base:
        wider = stated.d_model * math.log(stated.base) / math.log(fitted.base)
        if (
            fitted.scaling == "none"
            and wider > stated.d_model
            and abs(wider - 2 * round(wider / 2)) < 1e-3 * wider
        ):
            head = 2 * round(wider / 2)
            findings.append(
                Finding(
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
            )
        else:
            findings.append(
                Finding(
                    "base_mismatch",
                    f"the frequencies fit base {fitted.base:g}, not the stated {stated.base:g}",
                    {"fitted_base": fitted.base, "stated_base": stated.base, **where},
                )
            )
    if _changes(replace(stated, base=fitted.base), fitted):
        described = _describe(fitted)
        findings.append(
            Finding(
                "scaling_mismatch",
                f"the frequencies fit {described}, not the stated {_describe(stated)}",
                {
                    "fitted_scaling": fitted.scaling,
                    "fitted_factor": fitted.factor,
                    "fitted_original_max_position_embeddings": (
                        fitted.original_max_position_embeddings
                    ),
                    "stated_scaling": stated.scaling,
                    "stated_factor": stated.factor,
                    **where,
                },
            )
        )
    return findings


def _describe(params: RopeParams) -> str:
    if params.scaling == "none":
        return "no scaling"
    text = f"{params.scaling} scaling with factor {params.factor:g}"
    if params.original_max_position_embeddings and params.scaling != "linear":
        text += f" over {params.original_max_position_embeddings} original positions"
    return text


def _attention_finding(factor: float, expected: float) -> Finding:
    if abs(factor - 1.0) < 1e-5:
        why = "no attention factor was applied"
    elif abs(factor - expected**2) < 1e-5 * expected**2:
        why = "the attention factor was applied twice"
    else:
        why = "cos and sin are scaled by another constant"
    return Finding(
        "attention_factor_mismatch",
        f"cos and sin have amplitude {factor:g}, not the expected attention factor "
        f"{expected:g}: {why}",
        {"fitted_factor": factor, "expected_factor": expected, "ratio": factor / expected},
    )


def _fit_offset(model: _Model, reading: _Reading, component: str, n: int) -> int | None:
    """The position whose phases the first row holds, by a ladder from the slowest pair up.

    The slowest pair gives candidates ``(φ + 2πk)/ω`` (every ``k`` up to 2^31, at most 2^14);
    each faster pair snaps each candidate to the nearest position consistent with its own phase,
    sharpening it; the candidate whose rounded position fits every pair of the ladder best
    wins, if it fits to within 0.01 rad. O(2^14 · 32).
    """
    if not reading.first_phases:
        return None
    omega = scaled(model.params, _length(model, n))[0].radians
    if component == "angle":
        k = int(np.argmax(omega))
        position = round(float(reading.first_phases[0][k]) / float(omega[k]))
        residual = np.abs(position * omega - reading.first_phases[0])
        fits = np.all(residual <= 1e-3 * np.maximum(1.0, np.abs(reading.first_phases[0])))
        return position if fits and 0 <= position < _MAX_POSITION else None
    order = np.argsort(omega)
    order = order[omega[order] > 0]
    if not len(order):
        return None
    spread = np.linspace(0, len(order) - 1, min(_LADDER, len(order))).round().astype(np.intp)
    ladder = order[np.unique(spread)]
    if (
        _phase_misfit(np.array([float(model.offset)]), omega, ladder, reading)[0]
        <= _PHASE_TOLERANCE
    ):
        return model.offset
    slowest = float(omega[ladder[0]])
    period = 2 * math.pi / slowest
    turns = min(_MAX_CANDIDATES // len(reading.first_phases), int(_MAX_POSITION / period) + 1)
    starts = [
        (np.mod(phases[ladder[0]], 2 * math.pi) + 2 * math.pi * np.arange(turns)) / slowest
        for phases in reading.first_phases
    ]
    candidates = np.concatenate(starts)
    for pair in ladder[1:]:
        w = float(omega[pair])
        snapped = []
        for phases in reading.first_phases:
            k = np.rint((candidates * w - phases[pair]) / (2 * math.pi))
            snapped.append((phases[pair] + 2 * math.pi * k) / w)
        stacked = np.stack(snapped)
        nearest = np.argmin(np.abs(stacked - candidates), axis=0)
        candidates = stacked[nearest, np.arange(len(candidates))]
    positions = np.rint(candidates)
    misfit = _phase_misfit(positions, omega, ladder, reading)
    best = int(np.argmin(misfit))
    if misfit[best] > _PHASE_TOLERANCE or not 0 <= positions[best] < _MAX_POSITION:
        return None
    return int(positions[best])


def _phase_misfit(
    positions: Float64Array,
    omega: Float64Array,
    ladder: npt.NDArray[np.intp],
    reading: _Reading,
) -> Float64Array:
    """The largest phase gap (rad) over the ladder of each candidate first position."""
    misfit = np.zeros(len(positions))
    for pair in ladder:
        gaps = [
            np.abs(np.angle(np.exp(1j * (positions * omega[pair] - phases[pair]))))
            for phases in reading.first_phases
        ]
        misfit = np.maximum(misfit, np.min(np.stack(gaps), axis=0))
    return misfit
