"""ALiBi: attention with linear biases (Press et al. 2022).

Head ``h`` adds ``-m_h·|i − j|`` to the attention logit between positions ``i`` and ``j``. For
``n`` a power of two the slopes are ``m_h = 2^(-8(h+1)/n)``; for other counts the reference rule
takes the slopes of the power of two below and fills up with every other slope of twice that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import lru_cache
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.declare import check_ranges, param
from posenc.numerics import costs

Component = Literal["bias", "slopes"]
COMPONENTS: tuple[str, ...] = get_args(Component)
MAX_HEADS = 1024


@dataclass(frozen=True)
class AlibiParams:
    num_heads: int = param(
        8,
        doc="attention heads; any count (the reference rule past powers of 2)",
        ge=1,
        le=MAX_HEADS,
    )

    def __post_init__(self) -> None:
        check_ranges(self)


def _power_of_two_slopes(n: int) -> list[Decimal]:
    # 2^(-8/n) raised to 1 … n: exact powers of two when 8/n is a whole number.
    with localcontext(prec=60):
        ratio = (Decimal(-8) / n * Decimal(2).ln()).exp()
        return [ratio ** (h + 1) for h in range(n)]


@lru_cache(maxsize=64)
def slopes(num_heads: int) -> npt.NDArray[np.float64]:
    """The reference slopes, as float64.

    >>> slopes(4).tolist(), slopes(3).tolist()
    ([0.25, 0.0625, 0.015625, 0.00390625], [0.0625, 0.00390625, 0.25])
    """
    closest = 2 ** math.floor(math.log2(num_heads))
    values = _power_of_two_slopes(closest)
    if closest < num_heads:
        values += _power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
    result = np.array([float(v) for v in values])
    result.flags.writeable = False
    return result


def shape(params: AlibiParams, count: int, component: str) -> tuple[int, ...]:
    return (params.num_heads, count, count) if component == "bias" else (params.num_heads,)


def encode(
    params: AlibiParams, positions: npt.NDArray[np.int64], dtype: str, component: str = "bias"
) -> npt.NDArray[np.floating]:
    """``bias[h, a, b] = -m_h·|positions[a] − positions[b]|``, or the slopes.

    >>> encode(AlibiParams(num_heads=2), np.array([0, 1, 3]), "float64")[0].tolist()
    [[0.0, -0.0625, -0.1875], [-0.0625, 0.0, -0.125], [-0.1875, -0.125, 0.0]]
    """
    m = slopes(params.num_heads)
    if component == "slopes":
        return m.astype(dtype)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(np.float64)
    bias: npt.NDArray[np.floating] = np.empty((len(m), *distance.shape), dtype=dtype)
    # One head at a time: one float64 product in flight, and a cancellation check between.
    product = np.empty_like(distance)
    for head, slope in enumerate(m):
        checkpoint()
        np.multiply(distance, -slope, out=product)
        # + 0.0 turns −0 into +0: the diagonal is +0, as 0 − m·0 gives in the reference.
        np.add(product, 0.0, out=product)
        bias[head] = product
    return bias


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """The output, and three float64-sized ``(n, n)`` matrices: the differences, the distances,
    and the one head's product in flight."""
    if component == "slopes":
        return Cost(params.num_heads * 64 + costs.SCRATCH, params.num_heads * costs.TRANSCENDENTAL)
    values = params.num_heads * count * count
    return Cost(values * costs.itemsize(dtype) + count * count * 32 + costs.SCRATCH, values * 16)


def magnitude(params: AlibiParams, first: int, last: int, component: str) -> float:
    """The steepest slope, times the longest distance between two of the positions (bias)."""
    steepest = float(slopes(params.num_heads).max())
    return steepest if component == "slopes" else steepest * (last - first)
