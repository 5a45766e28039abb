"""The sinusoidal encoding of "Attention Is All You Need" (Vaswani et al., 2017).

With ``h = ceil(d_model / 2)`` frequencies ``ω_i = base^(-2i/d_model)`` and ``θ = pos · ω_i``:

- ``interleaved``: column ``2i`` is ``sin θ``, column ``2i+1`` is ``cos θ`` (if ``2i+1 < d_model``);
- ``split``: columns ``0 … h-1`` hold the sines, columns ``h … d_model-1`` the cosines.

An odd ``d_model`` keeps the sine of the last frequency and drops its cosine: the paper's formula
extended, not a padded table. Values come from :func:`posenc.exact.sincos` and are rounded once to
the requested dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from posenc.errors import ParameterError
from posenc.exact import MAX_POSITION, Turns, geometric_turns, sincos
from posenc.rotation import fill_consecutive

Layout = Literal["interleaved", "split"]
DType = Literal["float32", "float64", "float16"]

MAX_D_MODEL = 65536
MAX_BASE = 1e12
# Rows per block keep the ~20 float64 temporaries of one block inside the L2 cache; a whole
# 8192 × 512 table at once runs ten times slower than the same work in blocks.
_BLOCK_ELEMENTS = 16384


@dataclass(frozen=True)
class SinusoidalParams:
    """Parameters of the sinusoidal scheme; hashable, so they key caches and ETags."""

    d_model: int
    base: float = 10000.0
    layout: Layout = "interleaved"

    def __post_init__(self) -> None:
        if not 1 <= self.d_model <= MAX_D_MODEL:
            raise ParameterError(
                "d_model", f"must be between 1 and {MAX_D_MODEL}, got {self.d_model}"
            )
        if not (1.0 < self.base <= MAX_BASE):  # also refuses NaN
            raise ParameterError("base", f"must be > 1 and ≤ {MAX_BASE:g}, got {self.base!r}")
        if self.layout not in get_args(Layout):
            raise ParameterError(
                "layout", f"must be one of {', '.join(get_args(Layout))}, got {self.layout!r}"
            )

    @property
    def frequency_count(self) -> int:
        return (self.d_model + 1) // 2


@lru_cache(maxsize=64)
def frequencies(d_model: int, base: float) -> Turns:
    """``ω_i = base^(-2i/d_model)`` for ``i < ceil(d_model/2)``, held exactly (see Turns).

    >>> frequencies(4, 100.0).radians.tolist()
    [1.0, 0.1]
    """
    return geometric_turns(base, Decimal(2) / Decimal(d_model), (d_model + 1) // 2)


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
    """
    positions = np.asarray(positions, dtype=np.int64)
    check_positions(positions)
    turns = frequencies(params.d_model, params.base)
    out = np.empty((len(positions), params.d_model), dtype=dtype)
    sines, cosines = _column_views(out, params)
    cosine_count = cosines.shape[1]
    rows = max(1, _BLOCK_ELEMENTS // len(turns))
    for start in range(0, len(positions), rows):
        block = slice(start, start + rows)
        sin_block, cos_block = sincos(positions[block], turns)
        sines[block] = sin_block
        cosines[block] = cos_block[:, :cosine_count]
    return out


def table(
    params: SinusoidalParams, seq_len: int, offset: int = 0, dtype: DType = "float64"
) -> npt.NDArray[np.floating]:
    """The encodings of positions ``offset … offset + seq_len - 1``.

    float32 and float16 tables are built by rotation from exact anchors (:mod:`posenc.rotation`),
    several times faster than the exact path and within ``0.5 + 2^-14`` ulp of the exact values.

    >>> table(SinusoidalParams(d_model=4, base=100.0), 4, dtype="float32")[3].tolist()
    [0.14112000167369843, -0.9899924993515015, 0.29552021622657776, 0.9553365111351013]
    """
    positions = consecutive_positions(seq_len, offset)
    if np.dtype(dtype) == np.float64:
        # Rotation's absolute error of ~2^-49 is several float64 ulps: take the exact path.
        return encode(params, positions, dtype)
    out = np.empty((seq_len, params.d_model), dtype=dtype)
    sines, cosines = _column_views(out, params)
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

    turns = frequencies(params.d_model, params.base)
    fill_consecutive(offset, seq_len, turns, place_rows, place_values)
    return out


def consecutive_positions(seq_len: int, offset: int) -> npt.NDArray[np.int64]:
    if seq_len < 1:
        raise ParameterError("seq_len", f"must be ≥ 1, got {seq_len}")
    if not 0 <= offset <= MAX_POSITION:
        raise ParameterError("offset", f"must be in [0, 2^31), got {offset}")
    if offset + seq_len - 1 > MAX_POSITION:
        raise ParameterError(
            "seq_len",
            f"offset + seq_len must be ≤ 2^31 (positions below 2^31), got {offset + seq_len}",
        )
    return np.arange(offset, offset + seq_len, dtype=np.int64)


def _column_views(
    out: npt.NDArray[np.floating], params: SinusoidalParams
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating]]:
    h = params.frequency_count
    if params.layout == "interleaved":
        return out[:, 0::2], out[:, 1::2]
    return out[:, :h], out[:, h:]
