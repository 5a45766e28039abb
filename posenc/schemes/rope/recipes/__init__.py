"""The runtimes a model is ported to, each computing its rope its own way in float32
(``recipe=ggml``: llama.cpp's ggml-cpu; ``recipe=mlx``: MLX's CPU backend with mlx-lm's
frequencies). Each module reproduces its runtime's sequence of operations and prepares, once per
table, the rows of cos, sin and angle per pair (:mod:`.rows`, which lays them out as every
served table is laid out); this one picks the runtime's.

``inv_freq`` of a runtime is the angle it gives position 1: ggml reaches a pair's angle by
repeated products from the position, so it has no frequency vector of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml, mlx
from posenc.schemes.rope.recipes.rows import Rows, table

_PREPARE: dict[str, Callable[[RopeParams, int], Rows]] = {
    "ggml": ggml.prepare,
    "mlx": mlx.prepare,
}


def prepare(params: RopeParams, seq_len: int) -> Rows:
    """The runtime's rows for a table ending at ``seq_len``; refuses, before any work, a rope
    the runtime does not implement."""
    return _PREPARE[params.recipe](params, seq_len)


_CHECK: dict[str, Callable[[RopeParams], None]] = {"ggml": ggml.check, "mlx": mlx.check}


def check(params: RopeParams) -> None:
    """Refuse a rope the runtime does not implement (its length aside), from its parameters
    alone: each runtime's ``prepare`` runs the same check before any work."""
    _CHECK[params.recipe](params)


def magnitude(params: RopeParams, last: int, component: str) -> float:
    """The largest |value| of ``component`` up to position ``last``, as the runtime computes
    it: its amplitude (cos 0 times its scale), its largest angle at ``last`` (each angle grows
    with the position), or at position 1 (``inv_freq``)."""
    rows = prepare(params, last + 1)
    position = {"angle": last, "inv_freq": 1}.get(component, 0)
    cos, _, angle = rows(np.array([position], dtype=np.int64))
    return float(np.abs(angle if component in ("angle", "inv_freq") else cos).max())


def encode(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str
) -> npt.NDArray[np.floating[Any]]:
    """``component`` as the runtime ``params.recipe`` computes it, then cast to ``dtype``.

    >>> encode(RopeParams(d_model=2, recipe="ggml"), np.array([1]), "float64", "sin").tolist()
    [[0.8414709568023682, 0.8414709568023682]]
    """
    # A dynamic rope's base is the whole table's.
    rows = prepare(params, int(positions.max()) + 1 if len(positions) else 1)
    if component == "inv_freq":
        frequencies: npt.NDArray[np.floating[Any]] = rows(np.ones(1, np.int64))[2][0]
        return frequencies.astype(dtype)
    return table(rows, positions, params.d_model, params.layout, dtype, component)
