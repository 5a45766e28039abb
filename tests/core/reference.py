"""The sinusoidal encoding evaluated with mpmath at 200 bits: the reference for every value test."""

from __future__ import annotations

import math

import mpmath
import numpy as np

mpmath.mp.prec = 200


def exact(position: int, column: int, d_model: int, base: float, layout: str) -> mpmath.mpf:
    h = (d_model + 1) // 2
    if layout == "interleaved":
        i, is_cos = column // 2, column % 2 == 1
    else:
        i, is_cos = (column, False) if column < h else (column - h, True)
    angle = position * mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * i) / d_model)
    return mpmath.cos(angle) if is_cos else mpmath.sin(angle)


def ulps(value: float, truth: mpmath.mpf, dtype: type[np.floating]) -> float:
    """|value − truth| in units of the last place of dtype at truth."""
    info = np.finfo(dtype)
    digits = info.nmant + 1
    _, exponent = math.frexp(float(truth))
    ulp = max(2.0 ** (exponent - digits), 2.0 ** (info.minexp - digits + 1))
    return float(abs(mpmath.mpf(value) - truth) / ulp)
