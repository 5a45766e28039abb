"""Sinusoids for images and volumes: each grid axis gets a block of channels of its own.

Rows are the grid's cells in row-major order (the last axis varies fastest). Conventions:

- ``mae`` (MAE / ViT reference, ``get_2d_sincos_pos_embed``): ``d_model / k`` channels per axis
  (k = 2 or 3 axes), each block a 1-D sinusoid with sines then cosines; the *last* axis's
  coordinate comes first (MAE meshes ``(w, h)``), so for 2-D the first half encodes the column
  and the second half the row. ``d_model`` must divide by ``2k``.
- ``positional-encodings`` (the PyPI package): ``c = 2·ceil(d_model / 2k)`` channels per axis,
  sin and cos interleaved, axes in order (first axis first), truncated to ``d_model``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.declare import check_ranges, param
from posenc.errors import InconsistentError, LimitError, ParameterError
from posenc.numerics import costs
from posenc.schemes.sinusoidal.maths import encode as encode_1d
from posenc.schemes.sinusoidal.params import SinusoidalParams

Convention = Literal["mae", "positional-encodings"]
MAX_CELLS = 2**24


@dataclass(frozen=True)
class GridParams:
    d_model: int = param(
        doc="width of the encoding; divisible by 4 (2-D) or 6 (3-D) for the mae convention",
        ge=1,
        le=65536,
    )
    grid: tuple[int, ...] = param(
        doc="the sides, H,W or H,W,D, at most 2^24 cells; replaces seq_len",
        ge=1,
        le=MAX_CELLS,
        min_items=2,
        max_items=3,
    )
    base: float = param(10000.0, doc="1 < base ≤ 1e12", gt=1, le=1e12)
    convention: Convention = param(
        "mae",
        doc="whose channel split: mae (half the channels per axis, as MAE/ViT) or "
        "positional-encodings (that PyPI package's)",
    )
    axes: ClassVar[int] = 0  # how many sides ``grid`` must have; 0 for any

    def __post_init__(self) -> None:
        check_ranges(self)
        k = len(self.grid)
        if self.axes and k != self.axes:
            raise ParameterError("grid", f"needs {self.axes} sides, got {k}")
        if math.prod(self.grid) > MAX_CELLS:
            raise LimitError("grid", f"holds {math.prod(self.grid)} cells, over the limit of 2^24")
        if self.convention == "mae" and self.d_model % (2 * k):
            raise InconsistentError(
                "d_model",
                f"must divide by {2 * k} for the mae convention in {k}-D, got {self.d_model}",
            )


@dataclass(frozen=True)
class Grid2DParams(GridParams):
    grid: tuple[int, ...] = param(
        doc="the sides H,W, at most 2^24 cells; replaces seq_len",
        ge=1,
        le=MAX_CELLS,
        min_items=2,
        max_items=2,
    )
    axes: ClassVar[int] = 2


@dataclass(frozen=True)
class Grid3DParams(GridParams):
    grid: tuple[int, ...] = param(
        doc="the sides H,W,D, at most 2^24 cells; replaces seq_len",
        ge=1,
        le=MAX_CELLS,
        min_items=3,
        max_items=3,
    )
    axes: ClassVar[int] = 3


def coordinates(grid: tuple[int, ...], cells: npt.NDArray[np.int64]) -> list[npt.NDArray[np.int64]]:
    """The coordinate along each axis of each row-major cell index."""
    return [c.astype(np.int64) for c in np.unravel_index(cells, grid)]


def blocks(params: GridParams) -> list[tuple[int, slice, SinusoidalParams]]:
    """(axis, channels, 1-D parameters) of each block: what /verify checks block by block."""
    k = len(params.grid)
    if params.convention == "mae":
        width = params.d_model // k
        axes = list(range(k))[::-1]
        one_d = SinusoidalParams(d_model=width, base=params.base, layout="split")
        return [(axis, slice(b * width, (b + 1) * width), one_d) for b, axis in enumerate(axes)]
    width = 2 * -(-params.d_model // (2 * k))
    one_d = SinusoidalParams(d_model=width, base=params.base)
    return [
        (axis, slice(axis * width, min((axis + 1) * width, params.d_model)), one_d)
        for axis in range(k)
        if axis * width < params.d_model
    ]


def shape(params: GridParams, count: int, component: str) -> tuple[int, ...]:
    return (count, params.d_model)


def encode(
    params: GridParams, cells: npt.NDArray[np.int64], dtype: str, component: str = ""
) -> npt.NDArray[np.floating]:
    """Encodings of row-major cell indices of the grid: ``(len(cells), d_model)``.

    >>> encode(GridParams(4, (2, 2)), np.arange(4), "float64").round(2).tolist()[1:3]
    [[0.84, 0.54, 0.0, 1.0], [0.0, 1.0, 0.84, 0.54]]
    """
    if cells.size and (cells.min() < 0 or cells.max() >= np.prod(params.grid)):
        raise InconsistentError("positions", f"cells must be in [0, {np.prod(params.grid)})")
    coords = coordinates(params.grid, cells)
    out = np.empty((len(cells), params.d_model), dtype=dtype)
    for axis, channels, one_d in blocks(params):
        width = channels.stop - channels.start
        out[:, channels] = encode_1d(one_d, coords[axis], "float64")[:, :width]
    return out


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """One float64 1-D table per axis block beside the output."""
    values = count * params.d_model
    return Cost(values * (costs.itemsize(dtype) + 8) + costs.SCRATCH, values * costs.TRANSCENDENTAL)
