"""The naive encodings that texts on positional encoding start from, served for comparison.

- ``index``: the position itself in every column — unbounded;
- ``normalized``: the position divided by the largest position asked for (``seq_len − 1``
  for a table from 0) — bounded, but the same position encodes differently in tables of
  different lengths;
- ``binary``: bit ``j`` of the position in column ``j``, least significant first — bounded and
  unique, but jumps discontinuously and has no rotation between positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.declare import check_ranges, param
from posenc.numerics import costs


@dataclass(frozen=True)
class BaselineParams:
    d_model: int = param(doc="width of the encoding", ge=1, le=65536)

    def __post_init__(self) -> None:
        check_ranges(self)


def shape(params: BaselineParams, count: int, component: str) -> tuple[int, ...]:
    return (count, params.d_model)


def index(
    params: BaselineParams, positions: npt.NDArray[np.int64], dtype: str, component: str = ""
) -> npt.NDArray[np.floating]:
    """The position itself in every column.

    >>> index(BaselineParams(2), np.array([0, 3]), "float32").tolist()
    [[0.0, 0.0], [3.0, 3.0]]
    """
    column = positions.astype(np.float64)[:, None]
    with np.errstate(over="ignore"):  # float16 overflows past 65504: the answer refuses it
        return np.repeat(column, params.d_model, axis=1).astype(dtype)


def normalized(
    params: BaselineParams, positions: npt.NDArray[np.int64], dtype: str, component: str = ""
) -> npt.NDArray[np.floating]:
    """The position over the largest position asked for.

    >>> normalized(BaselineParams(1), np.array([0, 1, 2, 4]), "float64").ravel().tolist()
    [0.0, 0.25, 0.5, 1.0]
    """
    largest = max(int(positions.max()), 1) if positions.size else 1
    column = positions.astype(np.float64) / largest
    return np.repeat(column[:, None], params.d_model, axis=1).astype(dtype)


def binary(
    params: BaselineParams, positions: npt.NDArray[np.int64], dtype: str, component: str = ""
) -> npt.NDArray[np.floating]:
    """Bit ``j`` of the position in column ``j``.

    >>> binary(BaselineParams(4), np.array([5]), "float32").tolist()
    [[1.0, 0.0, 1.0, 0.0]]
    """
    bits = np.arange(params.d_model, dtype=np.int64)
    # Positions are below 2^31: bits from 31 on are zero (shifting by ≥ 63 is undefined).
    values = (positions[:, None] >> np.minimum(bits, 62)[None, :]) & 1
    return values.astype(dtype)


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A float64 table, then its cast."""
    values = count * params.d_model
    return Cost(values * (costs.itemsize(dtype) + 8) + costs.SCRATCH, values * costs.ARITHMETIC)
