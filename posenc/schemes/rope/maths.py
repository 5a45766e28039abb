"""Rotary position embedding (RoFormer, Su et al. 2021): tables, rotation and their costs.

Pair ``i`` of a ``d_model``-wide head is rotated by ``pos · ω_i`` with ``ω_i = base^(-2i/d)``
before scaling (:mod:`.scaling`). ``interleaved`` rotates pairs ``(2i, 2i+1)`` (RoFormer, GPT-J);
``split`` rotates ``(i, i + d/2)`` (Hugging Face ``rotate_half``). ``cos`` and ``sin`` are
multiplied by the attention factor, as transformers does.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.declare import Positions
from posenc.errors import InconsistentError
from posenc.numerics import costs, kernels
from posenc.numerics.exact import (
    consecutive_positions,
    fresh_output,
    sincos,
)
from posenc.numerics.rotation import fill_consecutive
from posenc.schemes.rope import recipes
from posenc.schemes.rope.params import RUNTIMES, Layout, RopeParams
from posenc.schemes.rope.recipes import framework
from posenc.schemes.rope.scaling import frequencies

ArrayT = TypeVar("ArrayT", bound=npt.NDArray[np.floating[Any]])


def sequence_length(positions: npt.NDArray[np.int64]) -> int:
    """The length that sets dynamic and longrope scaling: one past the largest position."""
    return int(positions.max()) + 1 if positions.size else 1


def shape(params: RopeParams, count: int, component: str) -> tuple[int, ...]:
    d = params.d_model
    return {
        "cos_sin": (2, count, d),
        "cos": (count, d),
        "sin": (count, d),
        "angle": (count, d // 2),
        "inv_freq": (d // 2,),
    }[component]


def encode(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str = "cos_sin"
) -> npt.NDArray[np.floating]:
    """The chosen component for ``positions``, rounded once to ``dtype``.

    >>> encode(RopeParams(d_model=4), np.array([1]), "float64", "cos").round(4).tolist()
    [[0.5403, 1.0, 0.5403, 1.0]]
    """
    if params.recipe == "framework":
        return framework.encode(params, positions, dtype, component)
    if params.recipe in RUNTIMES:
        return recipes.encode(params, positions, dtype, component)
    if _compiled(component, dtype) and _consecutive(positions):
        # A table after all: half the transcendental work, by the compiled loops.
        return table(params, len(positions), int(positions[0]), dtype, component)
    return _encode_exact(params, positions, dtype, component)


def _encode_exact(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str
) -> npt.NDArray[np.floating]:
    turns, attention = frequencies(params, sequence_length(positions))
    if component == "inv_freq":
        return turns.radians.astype(dtype)
    if component == "angle":
        return (positions.astype(np.float64)[:, None] * turns.radians).astype(dtype)
    sin, cos = sincos(positions, turns)
    expanded = {"cos": [cos], "sin": [sin], "cos_sin": [cos, sin]}[component]
    tables = [expand(part * attention, params.layout) for part in expanded]
    stacked = tables[0] if len(tables) == 1 else np.stack(tables)
    return stacked.astype(dtype)


_TABLES = {"cos_sin": (1, 0), "cos": (-1, 0), "sin": (0, -1)}  # (sin plane, cos plane)


def _compiled(component: str, dtype: str) -> bool:
    return component in _TABLES and np.dtype(dtype) in (np.float32, np.float64)


def _consecutive(positions: npt.NDArray[np.int64]) -> bool:
    return bool(positions.size) and bool(np.all(np.diff(positions) == 1))


def table(
    params: RopeParams,
    seq_len: int,
    offset: int = 0,
    dtype: str = "float32",
    component: str = "cos_sin",
    threads: int = 1,
    finished: kernels.Finished | None = None,
) -> npt.NDArray[np.floating]:
    """``component`` for positions ``offset … offset + seq_len - 1``.

    ``cos``/``sin`` repeat ``d/2`` distinct columns, so only ``seq_len · d/2`` values are
    computed and each is written twice. float32 tables are built by rotation from exact
    anchors, as the sinusoid's (within ``0.5 + 2^-14`` ulp of the exact values, values below
    2^-10 recomputed exactly); float64 ones on the exact path. Both by the compiled loops of
    :mod:`.kernels`, bit for bit :func:`table_reference`; ``threads`` splits the rows, and
    ``finished`` hears of the rows final so far, in the array (planes, seq_len, d_model) that
    is the answer (cos_sin's two planes, else one).

    >>> table(RopeParams(d_model=4), 2, 0, "float32", "cos")[1].tolist()
    [0.5403022766113281, 0.9999499917030334, 0.5403022766113281, 0.9999499917030334]
    """
    positions = consecutive_positions(seq_len, offset)
    if params.recipe != "exact" or not _compiled(component, dtype):
        return encode(params, positions, dtype, component)
    turns, attention = frequencies(params, offset + seq_len)
    sin_plane, cos_plane = _TABLES[component]
    planes = 2 if component == "cos_sin" else 1
    out, in_place = fresh_output(
        (planes, seq_len, params.d_model), dtype, populate=finished is None
    )
    mode = kernels.ROPE_SPLIT if params.layout == "split" else kernels.ROPE_INTERLEAVED
    store = kernels.Store(mode, len(turns), sin_plane, cos_plane, attention)
    fill = kernels.exact_table if np.dtype(dtype) == np.float64 else kernels.rotated_table
    fill(out, offset, turns, store, threads, finished, in_place)
    result: npt.NDArray[np.floating] = out if component == "cos_sin" else out[0]
    return result


# Bytes and work of the frequencies (numerics.doubledouble) when they are not cached: measured
# 260-425 bytes at the peak (yarn and llama3 blend in triple-doubles too).
_FREQUENCY_COST = Cost(bytes=1024, work=5_000)
_WORK_PER_STILL_PAIR = 80


def table_cost(
    params: RopeParams, seq_len: int, dtype: str, component: str = "cos_sin", threads: int = 1
) -> Cost:
    """Peak working bytes (the output included) and work of :func:`table`, from the
    parameters alone: an upper bound, frequencies taken as not cached.

    >>> table_cost(RopeParams(d_model=128), 8192, "float32").bytes < 1.25 * 2 * 8192 * 128 * 4
    True
    """
    h = params.d_model // 2
    values = math.prod(shape(params, seq_len, component))
    out = values * np.dtype(dtype).itemsize
    frequencies = Cost(_FREQUENCY_COST.bytes * h, _FREQUENCY_COST.work * h)
    if not _compiled(component, dtype):
        # The exact path over (n, h), its ~30 temporaries, expanded and stacked in float64.
        working = Cost(240 * seq_len * h + 24 * values, 40 * seq_len * h + 4 * values + 100_000)
    elif np.dtype(dtype) == np.float64:
        working = kernels.exact_cost(seq_len, h, values, threads)
    else:
        working = kernels.rotated_cost(seq_len, h, values, threads)
        # A pair held still (rotary_pairs) has sin 0 in every row, below the rotation's
        # threshold, so the loops recompute it exactly row after row: measured 31-39 ns each.
        still = h - (params.rotary_pairs or h)
        working += Cost(0, _WORK_PER_STILL_PAIR * still * seq_len)
    # 64 KiB: the Python objects and small arrays around the buffers.
    return frequencies.peak(Cost(out + 65536, 0) + working)


def table_reference(
    params: RopeParams, seq_len: int, offset: int, dtype: str, component: str = "cos_sin"
) -> npt.NDArray[np.floating]:
    """:func:`table` in NumPy alone: the reference the compiled loops are tested against."""
    positions = consecutive_positions(seq_len, offset)
    if np.dtype(dtype) == np.float64 or component not in _TABLES:
        return _encode_exact(params, positions, dtype, component)
    turns, attention = frequencies(params, offset + seq_len)
    half = np.empty((2, seq_len, len(turns)))  # sin, cos

    def place_rows(start: int, rows: npt.NDArray[np.float64]) -> None:
        half[:, start : start + len(rows)] = rows.reshape(len(rows), -1, 2).transpose(2, 0, 1)

    def place_values(
        rows: npt.NDArray[np.intp], columns: npt.NDArray[np.intp], values: npt.NDArray[np.float64]
    ) -> None:
        half[columns % 2, rows, columns // 2] = values

    fill_consecutive(offset, seq_len, turns, place_rows, place_values)
    expanded = {"cos": [half[1]], "sin": [half[0]], "cos_sin": [half[1], half[0]]}[component]
    tables = [expand(part * attention, params.layout) for part in expanded]
    stacked = tables[0] if len(tables) == 1 else np.stack(tables)
    return stacked.astype(dtype)


def expand(half: ArrayT, layout: Layout) -> ArrayT:
    """(n, d/2) → (n, d) the way the reference implementations expand cos and sin, in the
    values' own dtype."""
    if layout == "split":
        return cast(ArrayT, np.concatenate([half, half], axis=1))
    return cast(ArrayT, np.repeat(half, 2, axis=1))


def rotate(
    params: RopeParams, vectors: npt.NDArray[np.float64], positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """``x·cos + rotate(x)·sin`` for each vector at its position, in float64.

    >>> rotate(RopeParams(d_model=2), np.array([[1.0, 0.0]]), np.array([0])).tolist()
    [[1.0, 0.0]]
    """
    if params.recipe != "exact":
        cos_sin = encode(params, positions, "float64", "cos_sin")
        return rotate_with(params.layout, vectors, cos_sin[0], cos_sin[1])
    turns, attention = frequencies(params, sequence_length(positions))
    sin, cos = sincos(positions, turns)
    cos, sin = expand(cos * attention, params.layout), expand(sin * attention, params.layout)
    return rotate_with(params.layout, vectors, cos, sin)


def rotate_with(
    layout: Layout, x: npt.NDArray[np.float64], cos: npt.NDArray[Any], sin: npt.NDArray[Any]
) -> npt.NDArray[np.float64]:
    """``x·cos + rotate_half(x)·sin`` (or GPT-J's every-two rotation) with given cos and sin,
    already expanded to the layout; ``x`` is ``(..., d)``."""
    h = x.shape[-1] // 2
    turned = np.empty_like(x)
    if layout == "split":
        turned[..., :h], turned[..., h:] = -x[..., h:], x[..., :h]
    else:
        turned[..., 0::2], turned[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    result: npt.NDArray[np.float64] = x * cos + turned * sin
    return result


def vectors(
    params: RopeParams, positions: Positions, vector: tuple[float, ...] | None
) -> npt.NDArray[np.float64]:
    """``R_p u`` for every position: ``u`` given, or the unit vector with equal entries."""
    if vector is None:
        u = np.full(params.d_model, 1.0 / np.sqrt(params.d_model))
    elif len(vector) != params.d_model:
        raise InconsistentError(
            "vector", f"must hold d_model = {params.d_model} numbers, got {len(vector)}"
        )
    else:
        u = np.array(vector, dtype=np.float64)
    return rotate(params, np.tile(u, (len(positions), 1)), positions)


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A table by the compiled loops (:func:`table_cost`), or sin and cos of every
    (position, pair) in float64, scaled, expanded and stacked (measured 69 bytes per
    ``count·d_model`` at the peak): whichever costs more. The frequencies alone (``inv_freq``)
    cost their computation, nothing that grows with ``count``."""
    if component == "inv_freq":
        h = params.d_model // 2
        return Cost(
            _FREQUENCY_COST.bytes * h + params.d_model * 16 + costs.SCRATCH,
            _FREQUENCY_COST.work * h,
        )
    pairs = count * params.d_model
    listed = Cost(pairs * 80 + costs.SCRATCH, pairs * costs.TRANSCENDENTAL)
    return costs.larger(table_cost(params, count, dtype, component), listed)


def magnitude(params: RopeParams, first: int, last: int, component: str) -> float:
    """The largest |value| of ``component`` for positions up to ``last``: the attention factor
    for cos and sin, the largest frequency, or the largest angle (``last`` times it)."""
    if params.recipe in RUNTIMES:
        return recipes.magnitude(params, last, component)
    turns, attention = frequencies(params, last + 1)
    top = float(turns.radians.max())
    exact = {"inv_freq": top, "angle": last * top}.get(component, attention)
    # transformers' recipe computes its factors and frequencies in float32: a few ulps of slack.
    return exact if params.recipe == "exact" else exact * (1 + 2**-20)
