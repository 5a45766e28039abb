"""The sinusoidal encoding of "Attention Is All You Need" (Vaswani et al., 2017).

With ``h = ceil(d_model / 2)`` frequencies ``ω_i = base^(-2i/d_model)`` and ``θ = pos · ω_i``:

- ``interleaved``: column ``2i`` is ``sin θ``, column ``2i+1`` is ``cos θ`` (if ``2i+1 < d_model``);
- ``split``: columns ``0 … h-1`` hold the sines, columns ``h … d_model-1`` the cosines.

An odd ``d_model`` keeps the sine of the last frequency and drops its cosine: the paper's formula
extended, not a padded table. Values come from :func:`.exact.sincos` and are rounded once to
the requested dtype.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.errors import ParameterError
from posenc.numerics import costs, kernels
from posenc.numerics.exact import (
    MAX_POSITION,
    Turns,
    consecutive_positions,
    fresh_output,
    geometric_turns,
    sincos,
)
from posenc.numerics.rotation import fill_consecutive
from posenc.schemes.sinusoidal import framework
from posenc.schemes.sinusoidal.params import (
    Convention,
    DType,
    SinusoidalParams,
)

# Rows per block keep the ~20 float64 temporaries of one block inside the L2 cache; a whole
# 8192 × 512 table at once runs ten times slower than the same work in blocks.
_BLOCK_ELEMENTS = 16384


# Bounded small: a d_model of 65536 holds ~1.3 MB of frequencies per entry.
@lru_cache(maxsize=16)
def frequencies(d_model: int, base: float, convention: Convention = "vaswani") -> Turns:
    """The angular frequencies, held exactly (see Turns).

    ``vaswani``: ``ω_i = base^(-2i/d_model)`` for ``i < ceil(d_model/2)``;
    ``tensor2tensor``/``fairseq``: ``ω_i = base^(-i/(h−1))`` for ``i < h = d_model // 2``
    (``h − 1`` taken as 1 when ``h = 1``, as tensor2tensor does).

    >>> frequencies(4, 100.0).radians.tolist(), frequencies(6, 100.0, "fairseq").radians.tolist()
    ([1.0, 0.1], [1.0, 0.1, 0.01])
    """
    with localcontext(prec=60):  # the exponent to 60 digits too, as geometric_turns needs
        if convention == "vaswani":
            return geometric_turns(base, Decimal(2) / Decimal(d_model), (d_model + 1) // 2)
        h = d_model // 2
        return geometric_turns(base, Decimal(1) / Decimal(max(h - 1, 1)), h)


def frequencies_of(params: SinusoidalParams) -> Turns:
    return frequencies(params.d_model, params.base, params.convention)


def check_positions(positions: npt.NDArray[np.int64], name: str = "positions") -> None:
    if positions.size and (positions.min() < 0 or positions.max() > MAX_POSITION):
        bad = positions[(positions < 0) | (positions > MAX_POSITION)][0]
        raise ParameterError(name, f"positions must be in [0, 2^31), got {int(bad)}")


def encode(
    params: SinusoidalParams, positions: npt.NDArray[np.int64], dtype: DType = "float64"
) -> npt.NDArray[np.floating]:
    """The encoding of each position: shape ``(len(positions), d_model)``, in ``dtype``.

    >>> encode(SinusoidalParams(d_model=4), np.arange(3)).round(4).tolist()
    [[0.0, 1.0, 0.0, 1.0], [0.8415, 0.5403, 0.01, 1.0], [0.9093, -0.4161, 0.02, 0.9998]]
    >>> encode(SinusoidalParams(d_model=3, layout="split"), np.array([1])).round(4).tolist()
    [[0.8415, 0.0022, 0.5403]]
    >>> fairseq = SinusoidalParams(d_model=5, convention="fairseq")
    >>> encode(fairseq, np.array([1, 2])).round(4).tolist()
    [[0.0, 0.0, 0.0, 0.0, 0.0], [0.9093, 0.0002, -0.4161, 1.0, 0.0]]
    """
    positions = np.asarray(positions, dtype=np.int64)
    check_positions(positions)
    if params.recipe == "framework":
        return framework.encode(params, positions, dtype)
    turns = frequencies_of(params)
    out = np.zeros((len(positions), params.d_model), dtype=dtype)
    sines, cosines = params.column_views(out)
    cosine_count = cosines.shape[1]
    rows = max(1, _BLOCK_ELEMENTS // max(len(turns), 1))
    for start in range(0, len(positions) if len(turns) else 0, rows):
        block = slice(start, start + rows)
        sin_block, cos_block = sincos(positions[block], turns)
        sines[block] = sin_block
        cosines[block] = cos_block[:, :cosine_count]
    if params.padding_idx is not None:
        out[positions == params.padding_idx] = 0
    return out


def table(
    params: SinusoidalParams,
    seq_len: int,
    offset: int = 0,
    dtype: DType = "float64",
    threads: int = 1,
    finished: kernels.Finished | None = None,
) -> npt.NDArray[np.floating]:
    """The encodings of positions ``offset … offset + seq_len - 1``.

    float32 and float16 tables are built by rotation from exact anchors (:mod:`.rotation`),
    several times faster than the exact path and within ``0.5 + 2^-14`` ulp of the exact values;
    float64 tables on the exact path. float32 and float64 tables of the paper's convention come
    from the compiled loops of :mod:`posenc.numerics.kernels`, bit for bit :func:`table_reference`;
    ``threads`` splits the rows between that many threads; ``finished`` hears of the rows
    final so far, in the array (1, seq_len, d_model) whose plane is the answer.

    >>> table(SinusoidalParams(d_model=4, base=100.0), 4, dtype="float32")[3].tolist()
    [0.14112000167369843, -0.9899924993515015, 0.29552021622657776, 0.9553365111351013]
    """
    consecutive_positions(seq_len, offset)
    if not _compiled(params, dtype):
        return table_reference(params, seq_len, offset, dtype)
    out, in_place = fresh_output((1, seq_len, params.d_model), dtype, populate=finished is None)
    mode = kernels.SIN_COS_INTERLEAVED if params.layout == "interleaved" else kernels.SIN_COS_SPLIT
    store = kernels.Store(mode, cosines=params.d_model // 2)
    fill = kernels.exact_table if np.dtype(dtype) == np.float64 else kernels.rotated_table
    fill(out, offset, frequencies_of(params), store, threads, finished, in_place)
    result: npt.NDArray[np.floating] = out[0]
    return result


def _compiled(params: SinusoidalParams, dtype: DType) -> bool:
    """The compiled loops serve the paper's exact table in float32 and float64."""
    exact_vaswani = params.convention == "vaswani" and params.recipe == "exact"
    return exact_vaswani and np.dtype(dtype) != np.float16


# Bytes and work of computing the frequencies (numerics.doubledouble) when they are not cached:
# measured 260 bytes at the peak.
_FREQUENCY_COST = Cost(bytes=512, work=5_000)


def table_cost(params: SinusoidalParams, seq_len: int, dtype: DType, threads: int = 1) -> Cost:
    """Peak working bytes (the output included) and work of :func:`table`, from the
    parameters alone: an upper bound, frequencies taken as not cached.

    >>> table_cost(SinusoidalParams(d_model=512), 2048, "float32").bytes < 1.25 * 2048 * 512 * 4
    True
    """
    h = params.frequency_count
    values = seq_len * params.d_model
    out = values * np.dtype(dtype).itemsize
    frequencies = Cost(_FREQUENCY_COST.bytes * h, _FREQUENCY_COST.work * h)
    if not _compiled(params, dtype):
        working = _reference_cost(seq_len, h, values, np.dtype(dtype) == np.float16)
    elif np.dtype(dtype) == np.float64:
        working = kernels.exact_cost(seq_len, h, values, threads)
    else:
        working = kernels.rotated_cost(seq_len, h, values, threads)
    # 64 KiB: the Python objects and small arrays around the buffers.
    return frequencies.peak(Cost(out + 65536, 0) + working)


def _reference_cost(seq_len: int, h: int, values: int, rotated: bool) -> Cost:
    # ~30 float64 temporaries per exact value, over blocks of _BLOCK_ELEMENTS (or of the
    # rotation's super-anchors and small values); complex chunks of the rotation.
    if not rotated:
        return Cost(240 * max(_BLOCK_ELEMENTS, h), 40 * seq_len * h + 2 * values + 100_000)
    exact = 240 * ((-(-seq_len // 256) + 32) * h + 16384)
    chunks = 4 * 16 * max(131072, 16 * h)
    return Cost(exact + chunks, 15 * values + 40 * (seq_len // 256 + 32) * h + 100_000)


def table_reference(
    params: SinusoidalParams, seq_len: int, offset: int = 0, dtype: DType = "float64"
) -> npt.NDArray[np.floating]:
    """:func:`table` in NumPy alone: the reference the compiled loops are tested against.

    >>> table_reference(SinusoidalParams(d_model=4, base=100.0), 4, dtype="float32")[3].tolist()
    [0.14112000167369843, -0.9899924993515015, 0.29552021622657776, 0.9553365111351013]
    """
    positions = consecutive_positions(seq_len, offset)
    if np.dtype(dtype) == np.float64 or params.convention != "vaswani" or params.recipe != "exact":
        # Rotation's absolute error of ~2^-48 is several float64 ulps: take the exact path.
        return encode(params, positions, dtype)
    out = np.empty((seq_len, params.d_model), dtype=dtype)
    sines, cosines = params.column_views(out)
    cosine_count = cosines.shape[1]

    def place_rows(start: int, rows: npt.NDArray[np.float64]) -> None:
        block = slice(start, start + len(rows))
        if params.layout == "interleaved":
            out[block] = rows[:, : params.d_model]  # already sin, cos, sin, cos …
        else:
            sines[block] = rows[:, 0::2]
            cosines[block] = rows[:, 1 : 2 * cosine_count : 2]

    def place_values(
        rows: npt.NDArray[np.intp], columns: npt.NDArray[np.intp], values: npt.NDArray[np.float64]
    ) -> None:
        frequency, is_cos = columns // 2, columns % 2 == 1
        keep = ~is_cos | (frequency < cosine_count)
        rows, frequency, is_cos, values = rows[keep], frequency[keep], is_cos[keep], values[keep]
        sines[rows[~is_cos], frequency[~is_cos]] = values[~is_cos]
        cosines[rows[is_cos], frequency[is_cos]] = values[is_cos]

    turns = frequencies_of(params)
    fill_consecutive(offset, seq_len, turns, place_rows, place_values)
    return out


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A table by the compiled loops (:func:`posenc.schemes.sinusoidal.maths.table_cost`), or listed
    positions in blocks of fixed size straight into the output (for ``recipe=framework`` the
    framework's float32 blocks, :func:`.framework.cost`): whichever costs
    more."""
    values = count * params.d_model
    listed = Cost(values * costs.itemsize(dtype) + costs.SCRATCH, values * costs.TRANSCENDENTAL)
    if params.recipe == "framework":
        listed = costs.larger(listed, framework.cost(params, count, dtype))
    return costs.larger(table_cost(params, count, dtype), listed)  # type: ignore[arg-type]
