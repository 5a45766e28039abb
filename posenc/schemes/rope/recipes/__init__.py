"""The runtimes a model is ported to, each computing its rope its own way in float32
(``recipe=ggml``: llama.cpp's ggml-cpu; ``recipe=mlx``: MLX's CPU backend with mlx-lm's
frequencies). Each module reproduces its runtime's sequence of operations and returns cos, sin
and the angle per pair; this one lays them out as every served table is laid out.

``inv_freq`` of a runtime is the angle it gives position 1: ggml reaches a pair's angle by
repeated products from the position, so it has no frequency vector of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.numerics.float32 import BLOCK_ELEMENTS, Float32Array
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml, mlx

Halves = Callable[
    [RopeParams, npt.NDArray[np.int64], int], tuple[Float32Array, Float32Array, Float32Array]
]
_HALVES: dict[str, Halves] = {"ggml": ggml.halves, "mlx": mlx.halves}


def halves(
    params: RopeParams, positions: npt.NDArray[np.int64], seq_len: int
) -> tuple[Float32Array, Float32Array, Float32Array]:
    """cos, sin and the angle per pair, ``(n, d/2)`` float32, as the runtime computes them for
    a table ending at ``seq_len``."""
    return _HALVES[params.recipe](params, positions, seq_len)


def check(params: RopeParams) -> None:
    """Refuse, before any work, a rope the runtime does not implement."""
    if params.recipe == "ggml":
        ggml.derive(params)
    elif params.recipe == "mlx":
        mlx.check(params)


def encode(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str
) -> npt.NDArray[np.floating[Any]]:
    """``component`` as the runtime ``params.recipe`` computes it, then cast to ``dtype``.

    >>> encode(RopeParams(d_model=2, recipe="ggml"), np.array([1]), "float64", "sin").tolist()
    [[0.8414709568023682, 0.8414709568023682]]
    """
    halves = _HALVES[params.recipe]
    if component == "inv_freq":
        frequencies: npt.NDArray[np.floating[Any]] = halves(params, np.ones(1, np.int64), 2)[2][0]
        return frequencies.astype(dtype)
    half = params.d_model // 2
    rows = max(1, BLOCK_ELEMENTS // half)
    n = len(positions)
    seq_len = int(positions.max()) + 1 if n else 1  # dynamic's length: the whole table's
    if component == "angle":
        table = np.empty((n, half), dtype=dtype)
    else:
        planes = 2 if component == "cos_sin" else 1
        table = np.empty((planes, n, params.d_model), dtype=dtype)
    for start in range(0, n, rows):
        checkpoint()
        block = slice(start, start + rows)
        cos, sin, angle = halves(params, positions[block], seq_len)
        if component == "angle":
            table[block] = angle
            continue
        chosen = {"cos_sin": (cos, sin), "cos": (cos,), "sin": (sin,)}[component]
        for plane, value in enumerate(chosen):
            if params.layout == "split":
                table[plane, block, :half], table[plane, block, half:] = value, value
            else:
                table[plane, block, 0::2], table[plane, block, 1::2] = value, value
    return table if component in ("cos_sin", "angle") else table[0]
