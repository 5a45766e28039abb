"""Where YaRN's ramp (Peng et al. 2023) runs, decided in float64 as transformers decides it.

Pair ``i`` is extrapolated (keeps ω_i) below ``low``, interpolated (ω_i / factor) above
``high``, and blended between. The ends are the pairs that turn ``beta_fast`` and
``beta_slow`` times over the original context. transformers and mlx-lm decide them in Python
doubles; ggml's own ``ggml_rope_yarn_corr_dims`` is float32, and :mod:`.recipes.ggml` keeps
that one (the GGUF check uses it too).
"""

from __future__ import annotations

import math


def correction_dim(d_model: int, original: float, base: float, rotations: float) -> float:
    """The (fractional) pair that turns ``rotations`` times over ``original`` positions."""
    return d_model * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))


def ramp_ends(
    d_model: int,
    original: float,
    base: float,
    beta_fast: float,
    beta_slow: float,
    truncate: bool = True,
) -> tuple[float, float]:
    """``(low, high)`` of the ramp: whole pairs unless ``truncate`` is false (gpt-oss),
    clamped to the head, and ``high`` nudged by 0.001 where they meet (transformers' guard
    against a ramp of no width)."""
    low = correction_dim(d_model, original, base, beta_fast)
    high = correction_dim(d_model, original, base, beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_model - 1)
    if low == high:
        high += 0.001
    return low, high
