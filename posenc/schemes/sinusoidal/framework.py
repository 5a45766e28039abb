"""The float32 tables of the sinusoid's libraries, operation by operation (``recipe=framework``).

``vaswani`` (the PyTorch module form):
    ``ω = exp(fl32(2i) · fl32(−ln base / d))``, ``θ = fl32(fl32(pos) · ω)``.
``fairseq`` (``SinusoidalPositionalEmbedding.get_embedding``):
    ``ω = exp(fl32(i) · fl32(−ln base / (h − 1)))`` with the step in float64 first.
``tensor2tensor`` (``get_timing_signal_1d``):
    ``ω = exp(fl32(i) · −fl32(fl32(ln base) / fl32(h − 1)))`` with the step divided in float32.

The float32 operations and where our bits may differ from torch's:
:mod:`posenc.numerics.float32`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.numerics.float32 import BLOCK_ELEMENTS, F32, Float32Array, angles, exp, scalar, sincos
from posenc.schemes.sinusoidal.params import SinusoidalParams


def frequencies(params: SinusoidalParams) -> Float32Array:
    """The library's float32 frequencies for ``params.convention`` (see the module docstring).

    The ``exp`` form lands where the rounding of ``−ln base / d`` takes it: here one float32 ulp
    below ``fl32(0.1)``, which rope's ``1 / base^(2i/d)`` gives.

    >>> from posenc.schemes.sinusoidal.maths import SinusoidalParams
    >>> frequencies(SinusoidalParams(d_model=4, base=100.0)).tolist()
    [1.0, 0.09999999403953552]
    """
    base, d = params.base, params.d_model
    if params.convention == "vaswani":
        step = scalar(-math.log(base) / d)
        return exp((np.arange(0, d, 2).astype(F32) * step).astype(F32))
    h = d // 2
    if params.convention == "fairseq":
        step = scalar(-(math.log(base) / max(h - 1, 1)))
    else:  # tensor2tensor: log(max/min) is a Python float divided by a float32 tensor
        step = -(scalar(math.log(base)) / scalar(max(h - 1, 1)))
    return exp((np.arange(h).astype(F32) * step).astype(F32))


def encode(
    params: SinusoidalParams, positions: npt.NDArray[np.int64], dtype: str
) -> npt.NDArray[np.floating]:
    """The library's float32 table for ``params.convention``, cast to ``dtype``: ``(n, d_model)``.

    >>> from posenc.schemes.sinusoidal.maths import SinusoidalParams
    >>> encode(SinusoidalParams(d_model=2), np.array([1]), "float64").tolist()
    [[0.8414709568023682, 0.5403022766113281]]
    """
    omega = frequencies(params)
    out = np.zeros((len(positions), params.d_model), dtype=dtype)
    sines, cosines = params.column_views(out)
    cosine_count = cosines.shape[1]
    rows = max(1, BLOCK_ELEMENTS // max(len(omega), 1))
    for start in range(0, len(positions) if len(omega) else 0, rows):
        checkpoint()
        block = slice(start, start + rows)
        sin, cos = sincos(angles(positions[block], omega))
        sines[block], cosines[block] = sin, cos[:, :cosine_count]
    if params.padding_idx is not None:
        out[positions == params.padding_idx] = 0
    return out


def cost(params: SinusoidalParams, count: int, dtype: str) -> Cost:
    """Peak bytes and work of :func:`encode`: the output, and per block of
    ``BLOCK_ELEMENTS`` angles their float32 positions and products, the float64 widening, the
    float64 sines and cosines and their float32 roundings (at most 48 bytes an angle); and per
    row the int64 position and the masks that check it (16 bytes, what a narrow table feels)."""
    values = count * params.d_model
    block = min(BLOCK_ELEMENTS, count * max(params.d_model // 2, 1) + params.d_model)
    held = values * np.dtype(dtype).itemsize + 16 * count + 48 * block + 65536
    return Cost(held, values * 48)
