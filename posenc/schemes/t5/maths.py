"""T5 relative position buckets (Raffel et al. 2020), exactly as the reference computes them.

The relative position ``j − i`` falls in one of ``num_buckets`` buckets: half of them (a quarter
each way when bidirectional) hold exact small distances, the rest grow logarithmically up to
``max_distance``. The logarithm is taken in float32, as in Mesh TensorFlow and transformers, so
that distances on a bucket boundary land where the reference puts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.declare import check_ranges, param
from posenc.errors import InconsistentError
from posenc.numerics import costs


@dataclass(frozen=True)
class T5Params:
    num_buckets: int = param(32, doc="buckets; at least 4 when bidirectional", ge=2, le=4096)
    max_distance: int = param(
        128,
        doc="distances from here on share the last bucket; more than the exact buckets "
        "(num_buckets/4 when bidirectional, else num_buckets/2)",
        ge=2,
        le=2**31 - 1,
    )
    bidirectional: bool = param(True, doc="encoder (true) or decoder (false)")

    def __post_init__(self) -> None:
        check_ranges(self)
        smallest = 4 if self.bidirectional else 2
        if self.num_buckets < smallest:
            raise InconsistentError(
                "num_buckets", f"must be at least {smallest} here, got {self.num_buckets}"
            )
        exact = (self.num_buckets // 2 if self.bidirectional else self.num_buckets) // 2
        if not exact < self.max_distance <= 2**31 - 1:
            raise InconsistentError(
                "max_distance",
                f"must be > {exact} (the exact buckets) and < 2^31, got {self.max_distance}",
            )


def buckets(params: T5Params, relative: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
    """The bucket of each relative position ``j − i``.

    >>> buckets(T5Params(), np.array([-200, -9, -1, 0, 1, 9, 200])).tolist()
    [15, 8, 1, 0, 17, 24, 31]
    """
    num_buckets = params.num_buckets
    result = np.zeros(relative.shape, dtype=np.int64)
    if params.bidirectional:
        num_buckets //= 2
        result += (relative > 0) * num_buckets
        distance = np.abs(relative)
    else:
        distance = -np.minimum(relative, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        scaled = (
            np.log(distance.astype(np.float32) / np.float32(max_exact))
            / np.float32(math.log(params.max_distance / max_exact))
            * np.float32(num_buckets - max_exact)
        )
    large = max_exact + np.where(distance < max_exact, 0, scaled).astype(np.int64)
    result += np.where(distance < max_exact, distance, np.minimum(large, num_buckets - 1))
    return result.astype(np.int32)


def shape(params: T5Params, count: int, component: str) -> tuple[int, ...]:
    return (count, count)


# Rows per chunk: ~256 K relative positions (~4 ms, ~16 MB of temporaries) between two checks.
_CHUNK_VALUES = 2**18


def encode(
    params: T5Params, positions: npt.NDArray[np.int64], dtype: str, component: str = "buckets"
) -> npt.NDArray[np.int32]:
    """``(n, n)`` buckets of ``positions[b] − positions[a]`` (memory minus query).

    Computed in blocks of rows straight into the output, so the float32 logarithms and int64
    temporaries are those of one block, and a cancelled request stops between blocks.
    """
    n = len(positions)
    out = np.empty((n, n), dtype=np.int32)
    rows = max(1, _CHUNK_VALUES // max(n, 1))
    for start in range(0, n, rows):
        checkpoint()
        block = positions[None, :] - positions[start : start + rows, None]
        out[start : start + rows] = buckets(params, block)
    return out


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """The int32 output, and the int64 and float32 temporaries of one block of rows (measured
    53 bytes per value of the block)."""
    values = count * count
    return Cost(values * 4 + min(values, 2**18) * 64 + costs.SCRATCH, values * 24)
