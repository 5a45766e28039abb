"""transformers' float32 rope, operation by operation (``recipe=framework``).

Hugging Face transformers 5 (``modeling_rope_utils`` and ``LlamaRotaryEmbedding.forward``):
``inv_freq = 1 / base^(fl32(2i) / d)`` (``1 / t`` is torch's ``reciprocal(t) · 1``), scaled as
the chosen ``scaling`` does in float32, 0 from ``rotary_pairs`` on (proportional rope);
``angle = fl32(fl32(pos) · inv_freq)``; ``cos = fl32(cos(angle) · fl32(attention_factor))``,
likewise ``sin``. The float32 operations and where our bits may differ from torch's:
:mod:`posenc.numerics.float32`.

RoFormer (``framework_precision=float64``) fills its table in NumPy float64 instead
(``RoFormerSinusoidalPositionalEmbedding.create_weight``): ``angle = pos / base^(2i/d)``, the
power a scalar ``pow`` per frequency, then ``sin`` and ``cos`` of it in float64, each rounded
once to float32 as the table stores it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.numerics.float32 import (
    F32,
    Float32Array,
    angles,
    power,
    reciprocal,
    scalar,
    sincos,
)
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes.rows import Halves, Rows, table
from posenc.schemes.rope.yarn_ramp import ramp_ends


def _exponents(dim: int) -> Float32Array:
    """``torch.arange(0, dim, 2).float() / dim``: the float32 exponents of the default rope."""
    return (np.arange(0, dim, 2, dtype=F32) / scalar(dim)).astype(F32)


def frequencies(params: RopeParams, seq_len: int) -> tuple[Float32Array, float]:
    """transformers' float32 inverse frequencies and its attention factor (a Python float).

    ``seq_len`` is one past the last position, as the rotary module's forward sees it: it picks
    ``long_factor`` over ``short_factor`` (longrope) and grows the base (dynamic) past
    ``original_max_position_embeddings`` — there in float32 tensor arithmetic, as the module's
    dynamic update computes it from ``max(position_ids) + 1``.

    >>> from posenc.schemes.rope.maths import RopeParams
    >>> frequencies(RopeParams(d_model=4, base=100.0), 1)[0].tolist()
    [1.0, 0.10000000149011612]
    >>> frequencies(RopeParams(d_model=4, base=100.0, rotary_pairs=1), 1)[0].tolist()
    [1.0, 0.0]
    """
    if params.framework_precision == "float64":
        return _roformer_inv_freq(params), 1.0
    inv_freq, attention = _scaled(params, seq_len)
    if params.rotary_pairs is not None:
        # proportional rope: the pairs past the rotating ones get a zero frequency, and
        # dividing 0 by its factor leaves 0
        inv_freq = inv_freq.copy()
        inv_freq[params.rotary_pairs :] = 0
    return inv_freq, attention


def _roformer_powers(params: RopeParams) -> npt.NDArray[np.float64]:
    """``base^(2i/d)`` in float64 as RoFormer's table computes it: NumPy's scalar ``power``
    of ``2 * (j // 2) / dim``, a Python float (the C library's ``pow``, as ``math.pow``)."""
    dim = params.d_model
    return np.array([math.pow(params.base, 2 * i / dim) for i in range(dim // 2)])


def _roformer_inv_freq(params: RopeParams) -> Float32Array:
    """The angle of position 1 (``1 / base^(2i/d)`` in float64), rounded once to float32."""
    return (1.0 / _roformer_powers(params)).astype(F32)


def _roformer_angles(
    positions: npt.NDArray[np.int64], powers: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``pos / base^(2i/d)`` in float64: a division, not a product with an inverse frequency."""
    return positions.astype(np.float64)[:, None] / powers[None, :]


def _scaled(params: RopeParams, seq_len: int) -> tuple[Float32Array, float]:
    dim, scaling = params.d_model, params.scaling
    exponents = _exponents(dim)
    attention = 1.0
    if scaling == "dynamic" and seq_len > _required(params.original_max_position_embeddings):
        base = _dynamic_base(params, seq_len)
    else:
        base = scalar(params.base)
    if scaling == "yarn":
        return _yarn(params, power(base, exponents))
    if scaling == "longrope":
        return _longrope(params, power(base, exponents), seq_len)
    inv_freq = reciprocal(power(base, exponents))
    if scaling == "linear":
        inv_freq = (inv_freq / scalar(_required(params.factor))).astype(F32)
    elif scaling == "llama3":
        inv_freq = _llama3(params, inv_freq)
    return inv_freq, attention


def _required(value: Any) -> Any:
    assert value is not None  # RopeParams checked that this scaling has it
    return value


def _dynamic_base(params: RopeParams, seq_len: int) -> np.float32:
    # With a tensor seq_len, ``factor * seq_len / L0 - (factor - 1)`` is float32 arithmetic,
    # ``** (dim / (dim - 2))`` a float32 tensor to a double power (std::pow in double) rounded
    # to float32, and ``base * …`` a float32 product.
    factor, original = scalar(_required(params.factor)), params.original_max_position_embeddings
    growth = F32(factor * scalar(seq_len)) / scalar(_required(original))
    growth = F32(growth - scalar(_required(params.factor) - 1))
    exponent = params.d_model / (params.d_model - 2)
    # torch squares for an exponent of 2 (d_model = 4) instead of calling pow.
    power = F32(growth * growth) if exponent == 2.0 else F32(np.float64(growth) ** exponent)
    return F32(scalar(params.base) * power)


def _yarn(params: RopeParams, pos_freqs: Float32Array) -> tuple[Float32Array, float]:
    factor = _required(params.factor)
    dim, original = params.d_model, _required(params.original_max_position_embeddings)
    extrapolation = reciprocal(pos_freqs)
    interpolation = reciprocal((scalar(factor) * pos_freqs).astype(F32))

    low, high = ramp_ends(
        dim,
        original,
        params.base,
        params.beta_fast or 32,
        params.beta_slow or 1,
        truncate=params.truncate is not False,
    )
    linear = (np.arange(dim // 2, dtype=F32) - scalar(low)).astype(F32) / scalar(high - low)
    ramp = np.clip(linear.astype(F32), F32(0), F32(1))
    keep = (F32(1) - ramp).astype(F32)  # 1 where ω is extrapolated (kept), 0 where interpolated
    inv_freq = (interpolation * (F32(1) - keep)).astype(F32) + (extrapolation * keep).astype(F32)
    attention = params.attention_factor
    if attention is None:
        if params.mscale and params.mscale_all_dim:
            attention = _mscale(factor, params.mscale) / _mscale(factor, params.mscale_all_dim)
        else:
            attention = _mscale(factor, 1.0)
    return inv_freq.astype(F32), float(attention)


def _mscale(scale: float, mscale: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _llama3(params: RopeParams, inv_freq: Float32Array) -> Float32Array:
    factor = scalar(_required(params.factor))
    low_factor = 1.0 if params.low_freq_factor is None else params.low_freq_factor
    high_factor = 4.0 if params.high_freq_factor is None else params.high_freq_factor
    original = params.original_max_position_embeddings or 8192
    # Python floats, compared with the float32 wavelengths after a cast to float32.
    low_wavelength, high_wavelength = original / low_factor, original / high_factor
    wavelength = (reciprocal(inv_freq) * scalar(2 * math.pi)).astype(F32)
    scaled = np.where(
        wavelength > scalar(low_wavelength), (inv_freq / factor).astype(F32), inv_freq
    )
    medium = ~(wavelength < scalar(high_wavelength)) & ~(wavelength > scalar(low_wavelength))
    # The smooth band, computed where it is: Llama 4's (low = high frequency factor) is empty
    # but for a wavelength exactly on its edge, where torch divides by zero too (nan).
    band, kept = wavelength[medium], scaled[medium]
    with np.errstate(divide="ignore", invalid="ignore"):
        smooth = (reciprocal(band) * scalar(original)).astype(F32)
        smooth = (smooth - scalar(low_factor)).astype(F32) / scalar(high_factor - low_factor)
    smooth = smooth.astype(F32)
    blended = ((F32(1) - smooth).astype(F32) * kept).astype(F32) / factor
    blended = (blended.astype(F32) + (smooth * kept).astype(F32)).astype(F32)
    out = scaled.astype(F32)
    out[medium] = blended
    return out


def _longrope(params: RopeParams, powers: Float32Array, seq_len: int) -> tuple[Float32Array, float]:
    original = _required(params.original_max_position_embeddings)
    factors = params.long_factor if seq_len > original else params.short_factor
    ext = np.array(_required(factors), dtype=np.float64).astype(F32)
    inv_freq = reciprocal((ext * powers).astype(F32))
    attention = params.attention_factor
    if attention is None:
        factor = params.factor or 1.0
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    return inv_freq, float(attention)


def prepare(params: RopeParams, seq_len: int) -> Rows:
    """transformers' rows for a table ending at ``seq_len``: the angles (float32, or RoFormer's
    float64), and their sin and cos each rounded once, times the attention factor in float32."""
    inv_freq, attention = frequencies(params, seq_len)
    powers = _roformer_powers(params) if params.framework_precision == "float64" else None
    scale = scalar(attention)

    def rows(positions: npt.NDArray[np.int64]) -> Halves:
        angle = (
            angles(positions, inv_freq) if powers is None else _roformer_angles(positions, powers)
        )
        sin, cos = sincos(angle)
        return (cos * scale).astype(F32), (sin * scale).astype(F32), angle

    return rows


def encode(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str
) -> npt.NDArray[np.floating]:
    """The component as transformers' rotary module computes it in float32 (or RoFormer's NumPy
    table in float64, ``framework_precision``), then cast to ``dtype``.

    ``cos_sin`` is ``(2, n, d)``, ``cos``/``sin`` ``(n, d)`` expanded to the layout, ``angle``
    ``(n, d/2)`` the angles (float32, or RoFormer's float64), ``inv_freq`` ``(d/2,)``.

    >>> from posenc.schemes.rope.maths import RopeParams
    >>> encode(RopeParams(d_model=2), np.array([1]), "float64", "sin").tolist()
    [[0.8414709568023682, 0.8414709568023682]]
    """
    seq_len = int(positions.max()) + 1 if positions.size else 1
    if component == "inv_freq":
        return frequencies(params, seq_len)[0].astype(dtype)
    rows = prepare(params, seq_len)
    return table(rows, positions, params.d_model, params.layout, dtype, component)
