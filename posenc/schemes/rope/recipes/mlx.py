"""MLX's rope (``recipe=mlx``): mlx-lm's frequencies and ``mx.fast.rope`` on MLX's CPU
backend, operation for operation.

MLX 0.32 runs ``mx.fast.rope`` on the CPU as its composed fallback (``mlx/fast.cpp``):
``positions = (arange(T) + offset) · scale`` in float32, inverse frequencies
``exp(arange(0, −d/2, −1) · (logf(base) / (d/2)))`` or ``reciprocal(freqs)``,
``theta = positions · inv_freqs``, then ``cos`` and ``sin``. Its CPU ``exp``, ``sin`` and ``cos``
are polynomials of its own (``mlx/backend/cpu/simd/math.h``: Cephes' with explicit fused
multiply-adds), ``sin``/``cos`` handing arguments past 2^23 to libm. A position is
``fl32(p)``: a decode step, or a prefill from an offset below 2^24.

mlx-lm's ``initialize_rope`` (``mlx_lm/models/rope_utils.py``) chooses the frequencies:
``nn.RoPE`` with ``scale = 1/factor`` for linear; ``DynamicNTKScalingRoPE`` (a new base in
Python doubles); ``Llama3RoPE``, ``YarnRoPE`` and ``SuScaledRoPE`` (``freqs``, in MLX float32
operations, ``powf`` for ``base ** x``). YaRN and LongRoPE multiply the input by their scale
instead of cos and sin, which for a unit vector is ``fl32(scale · cos)``; LongRoPE always takes
the long factors, and neither reads a stated ``attention_factor``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from posenc.errors import NotApplicableError
from posenc.numerics.float32 import F32, Float32Array, scalar
from posenc.numerics.fused import fma32
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes.rows import Halves, Rows
from posenc.schemes.rope.yarn_ramp import ramp_ends

_LIBM_FROM = np.float32(8388608.0)  # sincos_checked: past 2^23, libm's sinf and cosf


@numba.njit(nogil=True, cache=True)
def _exp(value: np.float32) -> np.float32:
    # simd::exp: 2^(x·log2 e) as a power of two times Cephes' polynomial of the fraction.
    x = np.float32(value * np.float32(1.442695))
    whole = math.floor(np.float64(x) + 0.5)  # x + 0.5 is a double in MLX's code
    fraction = np.float32(x - np.float32(whole))
    p = np.float32(1.535336188319500e-4)
    p = fma32(p, fraction, np.float32(1.339887440266574e-3))
    p = fma32(p, fraction, np.float32(9.618437357674640e-3))
    p = fma32(p, fraction, np.float32(5.550332471162809e-2))
    p = fma32(p, fraction, np.float32(2.402264791363012e-1))
    p = fma32(p, fraction, np.float32(6.931472028550421e-1))
    p = fma32(p, fraction, np.float32(1.0))
    if value > np.float32(88.0):
        return np.float32(np.inf)
    if value < np.float32(-88.0):
        return np.float32(0.0)
    return np.float32(np.float32(math.ldexp(1.0, int(whole))) * p)


@numba.njit(nogil=True, cache=True)
def _sin_cos(value: np.float32) -> tuple[np.float32, np.float32]:
    # simd::sincos_checked<Sine> for both: MLX evaluates sin and cos as two ops, each the same
    # reduction and the same two polynomials; only the choice at the end differs.
    if abs(value) > _LIBM_FROM:
        return np.float32(math.sin(value)), np.float32(math.cos(value))
    negative = value < np.float32(0)
    x = np.float32(abs(value))
    octant = np.uint32(np.float32(x * np.float32(1.27323954473516)))
    octant = np.uint32((octant + np.uint32(1)) & ~np.uint32(1))
    y = np.float32(octant)
    second = (octant & np.uint32(2)) != 0
    x = fma32(y, np.float32(-0.78515625), x)
    x = fma32(y, np.float32(-2.4187564849853515625e-4), x)
    x = fma32(y, np.float32(-3.77489497744594108e-8), x)
    sign_sin = negative ^ ((octant & np.uint32(4)) != 0)
    sign_cos = (np.uint32(octant - np.uint32(2)) & np.uint32(4)) != 0
    z = np.float32(x * x)
    y1 = fma32(z, np.float32(2.443315711809948e-5), np.float32(-1.388731625493765e-3))
    y2 = fma32(z, np.float32(-1.9515295891e-4), np.float32(8.3321608736e-3))
    y1 = fma32(y1, z, np.float32(4.166664568298827e-2))
    y2 = fma32(y2, z, np.float32(-1.6666654611e-1))
    y1 = np.float32(y1 * z)
    y2 = np.float32(y2 * z)
    y1 = np.float32(y1 * z)
    y2 = fma32(x, y2, x)
    y1 = fma32(z, np.float32(-0.5), y1)
    y1 = np.float32(y1 + np.float32(1.0))
    ys = y1 if second else y2
    yc = y2 if second else y1
    return (-ys if sign_sin else ys), (yc if sign_cos else -yc)


@numba.njit(nogil=True, cache=True)
def _default_inverse(log_step: np.float32, half: int) -> Float32Array:
    out = np.empty(half, dtype=np.float32)
    for j in range(half):
        out[j] = _exp(np.float32(np.float32(-j) * log_step))
    return out


@numba.njit(nogil=True, cache=True)
def _powf(base: np.float32, exponents: Float32Array) -> Float32Array:
    out = np.empty(exponents.shape[0], dtype=np.float32)
    for j in range(exponents.shape[0]):
        out[j] = math.pow(base, exponents[j])
    return out


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _rows(
    positions: npt.NDArray[np.int64],
    scale: np.float32,
    inverse: Float32Array,
    input_scale: np.float32,
    cos: Float32Array,
    sin: Float32Array,
    angle: Float32Array,
) -> None:
    for row in range(positions.shape[0]):
        position = np.float32(np.float32(positions[row]) * scale)
        for pair in range(inverse.shape[0]):
            theta = np.float32(position * inverse[pair])
            angle[row, pair] = theta
            sine, cosine = _sin_cos(theta)
            cos[row, pair] = np.float32(input_scale * cosine)
            sin[row, pair] = np.float32(input_scale * sine)


def check(params: RopeParams) -> None:
    """Refuse what mlx-lm does not build (RoFormer's float64 table is transformers')."""
    if params.rotary_pairs is not None:
        raise NotApplicableError(
            "recipe", "rope", "recipe=mlx does not serve rotary_pairs (proportional rope)"
        )
    if params.scaling == "longrope" and params.layout == "interleaved":
        raise NotApplicableError(
            "recipe", "rope", "mlx-lm's SuScaledRoPE (longrope) turns split pairs only"
        )


def _exponents(dim: int) -> Float32Array:
    """``mx.arange(0, dims, 2, dtype=float32) / dims``."""
    return (np.arange(0, dim, 2, dtype=F32) / scalar(dim)).astype(F32)


def _periods(params: RopeParams, seq_len: int) -> tuple[Float32Array | None, float, float, float]:
    """mlx-lm's rope for ``params``: its ``freqs`` (None for ``mx.fast.rope``'s own), the base
    and position scale it passes, and the scale it multiplies the input by."""
    dim, scaling, base = params.d_model, params.scaling, params.base
    factor = float(params.factor or 1.0)
    if scaling in ("none", "linear"):
        return None, base, 1.0 / factor if scaling == "linear" else 1.0, 1.0
    if scaling == "dynamic":
        trained = params.original_max_position_embeddings or 1
        length = max(seq_len, trained)
        grown = base * ((factor * length / trained) - (factor - 1)) ** (dim / (dim - 2))
        return None, grown, 1.0, 1.0
    periods = _powf(scalar(base), _exponents(dim))
    if scaling == "llama3":
        return _llama3(params, periods), base, 1.0, 1.0
    if scaling == "yarn":
        return _yarn(params, periods)
    return _longrope(params, periods)


def _llama3(params: RopeParams, freqs: Float32Array) -> Float32Array:
    factor = scalar(params.factor or 8.0)
    low = 1.0 if params.low_freq_factor is None else params.low_freq_factor
    high = 4.0 if params.high_freq_factor is None else params.high_freq_factor
    old = params.original_max_position_embeddings or 8192
    wavelengths = (scalar(2 * math.pi) * freqs).astype(F32)
    scaled = np.where(wavelengths > scalar(old / low), (freqs * factor).astype(F32), freqs)
    medium = (wavelengths > scalar(old / high)) & (wavelengths < scalar(old / low))
    # The smooth band, computed where it is: Llama 4's (low = high frequency factor) is empty.
    smooth = ((scalar(old) / wavelengths[medium]).astype(F32) - scalar(low)).astype(F32)
    smooth = (smooth / scalar(high - low)).astype(F32)
    blend = (((F32(1) - smooth).astype(F32) / factor).astype(F32) + smooth).astype(F32)
    out = scaled.astype(F32)
    out[medium] = (scaled[medium] / blend).astype(F32)
    return out


def _yarn(params: RopeParams, extra: Float32Array) -> tuple[Float32Array, float, float, float]:
    dim, base = params.d_model, params.base
    factor = float(params.factor or 1.0)
    original = params.original_max_position_embeddings or 4096

    # mlx-lm's YarnRoPE decides its ramp as transformers does, always in whole pairs.
    low, high = ramp_ends(dim, original, base, params.beta_fast or 32, params.beta_slow or 1)
    linear = (np.arange(dim // 2, dtype=F32) - scalar(low)).astype(F32) / scalar(high - low)
    mask = (F32(1) - np.clip(linear.astype(F32), F32(0), F32(1))).astype(F32)
    inter = (scalar(factor) * extra).astype(F32)
    numerator = (inter * extra).astype(F32)
    denominator = (inter * mask).astype(F32) + (extra * (F32(1) - mask).astype(F32)).astype(F32)
    periods = (numerator / denominator.astype(F32)).astype(F32)

    def get_mscale(mscale: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0

    mscale = get_mscale(params.mscale or 1.0) / get_mscale(params.mscale_all_dim or 0.0)
    return periods, base, 1.0, mscale


def _longrope(params: RopeParams, freqs: Float32Array) -> tuple[Float32Array, float, float, float]:
    original = params.original_max_position_embeddings or 4096
    long = np.array(params.long_factor or (), dtype=np.float64).astype(F32)
    factor = float(params.factor or 1.0)  # max_position_embeddings / original
    scale = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return (long * freqs).astype(F32), params.base, 1.0, scale


def compile_loops() -> None:
    """MLX's frequencies from the base alone (a rope without scaling): the examples scale
    MLX's rope, which takes its frequencies given."""
    prepare(RopeParams(d_model=8, recipe="mlx"), 1)(np.arange(2, dtype=np.int64))


def prepare(params: RopeParams, seq_len: int) -> Rows:
    """MLX's rows for ``params`` in a table ending at ``seq_len`` (the dynamic base's length)."""
    check(params)
    periods, base, scale, input_scale = _periods(params, seq_len)
    half = params.d_model // 2
    if periods is None:
        if not base < float(np.finfo(F32).max):
            raise NotApplicableError(
                "recipe",
                "rope",
                f"MLX's dynamic base grows to {base:.3g} for {seq_len} "
                "positions, past float32's largest number",
            )
        log_step = F32(F32(math.log(F32(base))) / F32(half))
        inverse = _default_inverse(log_step, half)
    else:
        inverse = (F32(1) / periods).astype(F32)

    def rows(positions: npt.NDArray[np.int64]) -> Halves:
        cos, sin, angle = (np.empty((len(positions), half), dtype=F32) for _ in range(3))
        _rows(positions.astype(np.int64), F32(scale), inverse, F32(input_scale), cos, sin, angle)
        return cos, sin, angle

    return rows
