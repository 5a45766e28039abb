"""The exact inverse frequencies and attention factor of each long-context scaling.

The scalings follow the rope initialisation of Hugging Face transformers — same parameters,
defaults and results — but evaluated exactly (scalars at 60 digits, each frequency in
triple-doubles, rounded once) rather than in float32:

- ``linear``: ``ω_i / factor``;
- ``dynamic`` (NTK-aware): base becomes ``base · (factor·L/L₀ − (factor−1))^(d/(d−2))`` once the
  sequence length ``L`` passes ``L₀ = original_max_position_embeddings``;
- ``yarn``: a linear ramp between ``ω_i`` and ``ω_i / factor`` over the dimensions whose
  wavelength falls between ``L₀/beta_fast`` and ``L₀/beta_slow`` rotations; attention factor
  ``0.1·ln(factor) + 1`` (or the ``mscale`` ratio);
- ``llama3``: ``ω_i / factor`` for wavelengths above ``L₀/low_freq_factor``, unchanged below
  ``L₀/high_freq_factor``, smoothly blended between;
- ``longrope``: ``ω_i / short_factor_i`` up to ``L₀``, ``ω_i / long_factor_i`` beyond; attention
  factor ``√(1 + ln(factor)/ln L₀)``.

With ``freq_factors`` (a GGUF's factor tensor, llama.cpp's view of llama3's or LongRoPE's
scaling), each ``ω_i`` is divided by ``f_i`` first, then scaled by ``linear`` or ``yarn`` as
ggml does. With ``rotary_pairs``, the pairs from it on have frequency 0 whatever the scaling.

"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.numerics import doubledouble as dd
from posenc.numerics.exact import (
    Turns,
    radians_and_turns,
)
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.yarn_ramp import ramp_ends


def frequencies(params: RopeParams, seq_len: int) -> tuple[Turns, float]:
    """:func:`scaled` from its cache whatever the rows: only ``dynamic`` (past the trained
    context) and ``longrope`` (on either side of it) read the sequence length, so a new offset
    or ``seq_len`` recomputes nothing for the other scalings."""
    original = params.original_max_position_embeddings or 0
    if params.scaling == "dynamic":
        length = max(seq_len, original)
    elif params.scaling == "longrope":
        length = original + 1 if seq_len > original else 1
    else:
        length = 1
    return scaled(params, length)


# Bounded small: a d_model of 65536 holds ~1.3 MB of frequencies per entry.
@lru_cache(maxsize=16)
def scaled(params: RopeParams, seq_len: int) -> tuple[Turns, float]:
    """The effective frequencies (exact) and the attention factor, for sequences up to ``seq_len``.

    Scalars (logarithms, the scalings' constants) at 60 digits, the frequencies themselves in
    triple-doubles (:mod:`posenc.numerics.doubledouble`), rounded once to the served doubles.

    >>> turns, factor = scaled(RopeParams(d_model=4, scaling="linear", factor=2.0), 1)
    >>> turns.radians.tolist(), factor
    ([0.5, 0.005], 1.0)
    """
    checkpoint()
    h = params.d_model // 2
    with localcontext(prec=60):
        base = Decimal(params.base)
        if params.scaling == "dynamic" and params.d_model > 2:  # d = 2: the one frequency is 1
            base = _dynamic_base(params, seq_len)
        scale = 1 / Decimal(params.factor) if params.scaling == "linear" else Decimal(1)  # type: ignore[arg-type]
        rows = radians_and_turns(base.ln(), Decimal(2) / Decimal(params.d_model), h, scale)
    if params.freq_factors is not None:  # a GGUF's factor tensor: ω_i / f_i, as ggml divides
        rows = dd.divide(rows, np.array(params.freq_factors, dtype=np.float64))
    attention = 1.0
    if params.scaling == "yarn":
        gain, attention = _yarn(params, h)
        rows = dd.multiply(rows, gain)
    elif params.scaling == "llama3":
        rows = dd.multiply(rows, _llama3(params, dd.take(rows, 1)))
    elif params.scaling == "longrope":
        extension, attention = _longrope(params, seq_len)
        rows = dd.divide(rows, extension)
    return Turns.from_rows(_still(rows, params.rotary_pairs)), attention


def _still(rows: dd.Triple, pairs: int | None) -> dd.Triple:
    """Frequency 0 (exactly) for the pairs from ``pairs`` on: transformers' proportional rope."""
    if pairs is None:
        return rows
    turning = np.arange(rows[0].shape[-1]) < pairs
    return tuple(np.where(turning, limb, 0.0) for limb in rows)  # type: ignore[return-value]


def _dynamic_base(params: RopeParams, seq_len: int) -> Decimal:
    factor = Decimal(params.factor)  # type: ignore[arg-type]
    original = Decimal(params.original_max_position_embeddings)  # type: ignore[arg-type]
    length = max(Decimal(seq_len), original)
    d = Decimal(params.d_model)
    growth = factor * length / original - (factor - 1)
    return Decimal(params.base) * (d / (d - 2) * growth.ln()).exp()


def _constant(value: Decimal, count: int) -> dd.Triple:
    limbs = dd.triples([value])
    return tuple(np.repeat(limb, count) for limb in limbs)  # type: ignore[return-value]


def _yarn(params: RopeParams, h: int) -> tuple[dd.Triple, float]:
    """The factor of each frequency, ``ramp/factor + (1 − ramp)``, and the attention factor."""
    factor = params.factor
    assert factor is not None and params.original_max_position_embeddings is not None
    low, high = ramp_ends(
        params.d_model,
        params.original_max_position_embeddings,
        params.base,
        params.beta_fast or 32.0,
        params.beta_slow or 1.0,
        truncate=params.truncate is not False,
    )
    # ramp = 0 keeps ω (extrapolation), ramp = 1 takes ω/factor (interpolation); between,
    # 1 − ramp·(1 − 1/factor) with ramp = (i − low)/(high − low).
    index = np.arange(h, dtype=np.float64)
    with localcontext(prec=60):
        inverse = 1 / Decimal(factor)
        slope = (1 - inverse) / (Decimal(high) - Decimal(low))
    gain = _constant(Decimal(1), h)
    # The ramp clips at 0 on low's side and at 1 on high's, whichever way round they lie (a
    # base near 1 sends both ends past d − 1 and the clipped low above the high).
    if high > low:
        interpolated, between = index >= high, (index > low) & (index < high)
    else:
        interpolated, between = index <= high, (index < low) & (index > high)
    for limb, value in zip(gain, dd.triples([inverse]), strict=True):
        limb[interpolated] = value[0]
    if between.any():
        # i − low is exact as a double-double; the ramp's product in triple-doubles.
        difference = dd.two_sum(index[between], np.full(int(between.sum()), -float(low)))
        ramp = dd.multiply((*difference, np.zeros_like(difference[0])), dd.triples([slope]))
        ones = _constant(Decimal(1), len(ramp[0]))
        blended = dd.add(ones, (-ramp[0], -ramp[1], -ramp[2]))
        for limb, value in zip(gain, blended, strict=True):
            limb[between] = value
    attention = params.attention_factor
    if attention is None:
        if params.mscale and params.mscale_all_dim:
            attention = _mscale(factor, params.mscale) / _mscale(factor, params.mscale_all_dim)
        else:
            attention = _mscale(factor, 1.0)
    return gain, attention


def _mscale(scale: float, mscale: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _llama3(params: RopeParams, turns: dd.Triple) -> dd.Triple:
    """The factor of each frequency: 1 for wavelengths ``2π/ω`` below ``L₀/high_freq_factor``
    (that is ``ν = ω/2π`` above ``high_freq_factor/L₀``), ``1/factor`` above
    ``L₀/low_freq_factor``, and ``1/factor + smooth·(1 − 1/factor)`` between, with
    ``smooth = (L₀·ν − low_freq_factor)/(high_freq_factor − low_freq_factor)``."""
    low_factor = params.low_freq_factor if params.low_freq_factor is not None else 1.0
    high_factor = params.high_freq_factor if params.high_freq_factor is not None else 4.0
    original = params.original_max_position_embeddings or 8192
    h = len(turns[0])
    with localcontext(prec=60):
        inverse = 1 / Decimal(params.factor)  # type: ignore[arg-type]
        above = dd.triples([Decimal(high_factor) / original])
        below = dd.triples([Decimal(low_factor) / original])
    keep = dd.greater(turns, above)
    divide = ~keep & dd.greater(below, turns)
    between = ~keep & ~divide
    gain = _constant(Decimal(1), h)
    for limb, value in zip(gain, dd.triples([inverse]), strict=True):
        limb[divide] = value[0]
    if between.any():
        with localcontext(prec=60):
            slope = (1 - inverse) / (Decimal(high_factor) - Decimal(low_factor))
        count = int(between.sum())
        scaled_turns = dd.multiply(
            dd.take(turns, between), dd.exact(np.full(count, float(original)))
        )
        offset = dd.add(scaled_turns, dd.exact(np.full(count, -low_factor)))
        smooth = dd.multiply(offset, dd.triples([slope]))
        blended = dd.add(smooth, _constant(inverse, count))
        for limb, value in zip(gain, blended, strict=True):
            limb[between] = value
    return gain


def _longrope(params: RopeParams, seq_len: int) -> tuple[npt.NDArray[np.float64], float]:
    """The divisor of each frequency and the attention factor."""
    original = params.original_max_position_embeddings
    assert original is not None and params.short_factor and params.long_factor
    ext = params.long_factor if seq_len > original else params.short_factor
    attention = params.attention_factor
    if attention is None:
        factor = params.factor or 1.0
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    return np.array(ext, dtype=np.float64), attention
