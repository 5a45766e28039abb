"""What is wrong with a client's rope cache: compare it with the exact one and name the fault.

The cache is a component of :mod:`posenc.schemes.rope.maths` for positions
``offset … offset + n − 1``: ``cos_sin`` ``(2, n, d)`` (cos, then sin), ``cos`` or ``sin``
``(n, d)``, or ``angle`` ``(n, d/2)``. Each finding is claimed from evidence measured on the
cache, and only when the cache is not already within ``tolerance_ulp`` of the exact table:

- ``matches_framework_recipe`` (:mod:`.recipe`) — every value within 2 float32 ulps of
  transformers' float32 recipe (:func:`posenc.schemes.rope.recipes.framework.encode`) in all but
  ``max(2, h/16)`` pairs (torch's ``pow`` is not correctly rounded in a few); the other
  findings then stay silent;
- ``matches_recipe`` (:mod:`.runtimes`) — otherwise, every value within one ulp of a runtime's
  float32 rope (``recipe=ggml``: llama.cpp; ``recipe=mlx``: MLX) for the stated rope: the
  recipe is named, and the other findings stay silent;
- ``partial_rotary`` (:mod:`.partial`) — the trailing columns do not rotate (cos 1, sin 0,
  angle 0), or the frequencies are those of a wider head ``D`` at the stated base
  (``ω_i = base^(−2i/D)``);
- ``layout_mismatch`` (:mod:`.layout`) — the cache repeats its values as the other layout
  does, or (read by the sense of rotation, or by the error) holds sin where cos belongs;
- ``base_mismatch`` / ``scaling_mismatch`` (:mod:`.spectrum`) — the frequencies ``ω̂_i`` read
  off the cache fit another base, scaling, factor or original length (fitted in ``ln ω``
  within the reading's noise);
- ``attention_factor_mismatch`` (:mod:`.attention`) — the amplitude ``√(cos² + sin²)`` is
  another constant;
- ``offset_mismatch`` (:mod:`.offset`) — the phases of the first row are those of another
  position;
- ``angle_precision`` (:mod:`.precision`, as the two below) — the error left grows in
  proportion to the position;
- ``collapsed_positions`` — distinct positions share a row;
- ``value_rounding`` — the cache conforms: its error is the dtype's rounding.

The fitted findings (swap, base, scaling, attention, offset) are reported only when the model
they make together explains the cache: its largest error at most a tenth of the stated one.
The families read the cache through :mod:`.reading` (frequencies, amplitude, first phases) and
:mod:`.rows` (the cache against a model, row by row); this module decides the order in which
they are tried and which silence the others.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from posenc.conformance import Conformance, Finding
from posenc.cost import Cost
from posenc.errors import ParameterError
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.conformance.attention import fit_attention
from posenc.schemes.rope.conformance.layout import layout_of, swap_finding, swapped
from posenc.schemes.rope.conformance.offset import fit_offset
from posenc.schemes.rope.conformance.partial import identity_tail
from posenc.schemes.rope.conformance.precision import (
    angle_precision,
    collapsed_positions,
    value_rounding,
)
from posenc.schemes.rope.conformance.reading import Reading, read
from posenc.schemes.rope.conformance.recipe import matches_framework_recipe
from posenc.schemes.rope.conformance.rows import DECISIVE, Errors, FloatArray, Model, compare
from posenc.schemes.rope.conformance.runtimes import matches_runtime_recipe
from posenc.schemes.rope.conformance.spectrum import fit_spectrum
from posenc.schemes.rope.params import Layout, RopeParams
from posenc.verify import CHUNK_ELEMENTS

COMPONENTS = ("cos_sin", "cos", "sin", "angle")


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
    stated = Model(params, offset)
    errors = compare(stated, array, component, n, tolerance_ulp)
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
    # The runtimes' recipes (matches_recipe) add their rows a chunk at a time: three float32
    # halves and three expanded float32 rows per value, and two passes of libm's or MLX's
    # sin and cos (measured ~40 ns a value each; declared 150).
    held = 8 * values + 10 * 8 * n + 24 * 8 * chunk + 40 * n + 4 * 1024 * h + 2_000_000
    chunks = 8 * (values // CHUNK_ELEMENTS + 1)
    work = 700 * values + 4 * 30_000 * h + 700 * (60 * h + 3_000) + 30_000 * chunks
    return Cost(held, work + 200 * n)


def _count(array: FloatArray, component: str) -> int:
    return int(array.shape[1] if component == "cos_sin" else array.shape[0])


def _shape_text(expected: tuple[int, ...]) -> str:
    return "(" + ", ".join("n" if size == 0 else str(size) for size in expected) + ")"


def _diagnose(
    stated: Model,
    array: FloatArray,
    component: str,
    n: int,
    errors: Errors,
    tolerance_ulp: float,
) -> tuple[Finding, ...]:
    """The findings in the order they are tried: a conforming cache says only that; the
    framework recipe, when recognised, silences the fits, and so does an identity tail."""
    if errors.max_ulp <= tolerance_ulp:
        # Rows equal in a conforming cache are equal in the exact table too (float16, d = 2).
        return (value_rounding(array, errors),)
    findings: list[Finding] = []
    positions = np.arange(stated.offset, stated.offset + n, dtype=np.int64)
    collapsed = collapsed_positions(array, component, positions)
    if collapsed is not None:
        findings.append(collapsed)
    recipe = matches_framework_recipe(stated, array, component, n, errors)
    if recipe is not None:
        findings.append(recipe)
        if collapsed is None:
            findings.extend(angle_precision(stated.params, component, array, positions, errors))
        return tuple(findings)
    runtime = matches_runtime_recipe(stated, array, component, n, errors)
    if runtime is not None:
        return (*findings, runtime)
    partial = identity_tail(stated, array, component, n, errors)
    if partial is not None:
        return (*findings, partial)
    layout, layout_finding = layout_of(stated, array, component, n)
    if layout_finding is not None:
        findings.append(layout_finding)
    model, fitted_findings, as_fitted = _explained(
        stated, layout, array, component, n, errors, tolerance_ulp
    )
    findings.extend(fitted_findings)
    if collapsed is None and as_fitted.max_ulp > tolerance_ulp:
        findings.extend(angle_precision(model.params, component, array, positions, as_fitted))
    return tuple(findings)


def _explained(
    stated: Model,
    layout: Layout,
    array: FloatArray,
    component: str,
    n: int,
    errors: Errors,
    tolerance_ulp: float,
) -> tuple[Model, list[Finding], Errors]:
    """The model fitted in ``layout``, its findings and the cache's errors against it. The
    findings stand only if that model explains the cache (its largest error at most a tenth
    of the stated one), each with both errors as evidence."""
    frame = replace(stated, params=replace(stated.params, layout=layout))
    exchanged = swapped(frame, array, component, n)
    framed = replace(frame, swapped=exchanged)
    reading = read(framed, array, component, n)
    model, findings = _fit(framed, reading, component, n, array.dtype)
    if exchanged:
        findings.insert(0, swap_finding(component, layout))
    if model == frame:
        if layout == stated.params.layout:
            return model, findings, errors
        return model, findings, compare(model, array, component, n, tolerance_ulp)
    as_fitted = compare(model, array, component, n, tolerance_ulp)
    if as_fitted.max_abs > DECISIVE * errors.max_abs:
        # The fits do not explain the cache: keep only what the structure showed.
        return model, [], errors
    for k, finding in enumerate(findings):
        evidence = {
            **finding.evidence,
            "max_abs_error_as_fitted": as_fitted.max_abs,
            "max_abs_error_as_stated": errors.max_abs,
        }
        findings[k] = replace(finding, evidence=evidence)
    return model, findings, as_fitted


def _fit(
    frame: Model, reading: Reading, component: str, n: int, dtype: np.dtype[Any]
) -> tuple[Model, list[Finding]]:
    """The model that the frequencies, amplitude and first row read off the cache fit best:
    each fit refines the one before."""
    model, findings = fit_spectrum(frame, reading, n)
    model, attention = fit_attention(model, reading, component, n, dtype)
    model, offset = fit_offset(model, reading, component, n)
    return model, [*findings, *attention, *offset]
