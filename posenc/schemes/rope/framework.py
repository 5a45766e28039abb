"""The float32 recipes of the reference libraries, operation by operation (``recipe=framework``).

A model was trained with the table its framework computed, not with the exact one: positions
rounded to float32, frequencies from float32 ``pow``/``exp``, angles ``fl32(pos · ω)`` whose error
grows with the position. This module reproduces those computations in NumPy, each float32
operation as one correctly rounded float32 NumPy operation in the order the library runs them.

Where the library calls a transcendental function (torch's ``pow``, ``exp``, ``sin``, ``cos`` on
float32 tensors), its CPU kernels (SLEEF, 1-ulp) are not correctly rounded and differ between
vectorised and scalar paths. We take the correctly rounded float32 result instead — the float64
value of the function at the float32 argument, rounded once — which is within 1 ulp of every
such kernel: the one place where our bits may differ from the library's.

Recipes
-------
rope (Hugging Face transformers 5, ``modeling_rope_utils`` and ``LlamaRotaryEmbedding.forward``):
    ``inv_freq = 1 / base^(fl32(2i) / d)`` (``1 / t`` is torch's ``reciprocal(t) · 1``), scaled
    as the chosen ``scaling`` does in float32; ``angle = fl32(fl32(pos) · inv_freq)``;
    ``cos = fl32(cos(angle) · fl32(attention_factor))``, likewise ``sin``.
sinusoid ``vaswani`` (the PyTorch module form):
    ``ω = exp(fl32(2i) · fl32(−ln base / d))``, ``θ = fl32(fl32(pos) · ω)``.
sinusoid ``fairseq`` (``SinusoidalPositionalEmbedding.get_embedding``):
    ``ω = exp(fl32(i) · fl32(−ln base / (h − 1)))`` with the step in float64 first.
sinusoid ``tensor2tensor`` (``get_timing_signal_1d``):
    ``ω = exp(fl32(i) · −fl32(fl32(ln base) / fl32(h − 1)))`` with the step divided in float32.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost

if TYPE_CHECKING:
    from posenc.schemes.rope.maths import RopeParams
    from posenc.schemes.sinusoidal.maths import SinusoidalParams

Recipe = Literal["exact", "framework"]
F32 = np.float32
Float32Array = npt.NDArray[np.float32]
# cos and sin of one block of float64 angles take about 20 ms at this many elements.
_BLOCK_ELEMENTS = 1 << 17


def _f32(x: float) -> np.float32:
    """A Python number as torch casts a scalar operand of a float32 tensor operation."""
    return np.float32(x)


def _pow(base: np.float32, exponents: Float32Array) -> Float32Array:
    """``base ** exponents`` in float32, correctly rounded (torch's SLEEF ``powf``: 1 ulp)."""
    return np.power(np.float64(base), exponents.astype(np.float64)).astype(F32)


def _exp(x: Float32Array) -> Float32Array:
    """float32 ``exp``, correctly rounded (torch's SLEEF ``expf``: within 1 ulp)."""
    return np.exp(x.astype(np.float64)).astype(F32)


def _reciprocal(x: Float32Array) -> Float32Array:
    """torch's ``s / t`` for a Python scalar ``s`` is ``t.reciprocal() * s``, not a division."""
    return (F32(1) / x).astype(F32)


def _exponents(dim: int) -> Float32Array:
    """``torch.arange(0, dim, 2).float() / dim``: the float32 exponents of the default rope."""
    return (np.arange(0, dim, 2, dtype=F32) / _f32(dim)).astype(F32)


def rope_inv_freq(params: RopeParams, seq_len: int) -> tuple[Float32Array, float]:
    """transformers' float32 inverse frequencies and its attention factor (a Python float).

    ``seq_len`` is one past the last position, as the rotary module's forward sees it: it picks
    ``long_factor`` over ``short_factor`` (longrope) and grows the base (dynamic) past
    ``original_max_position_embeddings`` — there in float32 tensor arithmetic, as the module's
    dynamic update computes it from ``max(position_ids) + 1``.

    >>> from posenc.schemes.rope.maths import RopeParams
    >>> rope_inv_freq(RopeParams(d_model=4, base=100.0), 1)[0].tolist()
    [1.0, 0.10000000149011612]
    """
    dim, scaling = params.d_model, params.scaling
    exponents = _exponents(dim)
    attention = 1.0
    if scaling == "dynamic" and seq_len > _required(params.original_max_position_embeddings):
        base = _dynamic_base(params, seq_len)
    else:
        base = _f32(params.base)
    if scaling == "yarn":
        return _yarn(params, _pow(base, exponents))
    if scaling == "longrope":
        return _longrope(params, _pow(base, exponents), seq_len)
    inv_freq = _reciprocal(_pow(base, exponents))
    if scaling == "linear":
        inv_freq = (inv_freq / _f32(_required(params.factor))).astype(F32)
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
    factor, original = _f32(_required(params.factor)), params.original_max_position_embeddings
    growth = F32(factor * _f32(seq_len)) / _f32(_required(original))
    growth = F32(growth - _f32(_required(params.factor) - 1))
    exponent = params.d_model / (params.d_model - 2)
    # torch squares for an exponent of 2 (d_model = 4) instead of calling pow.
    power = F32(growth * growth) if exponent == 2.0 else F32(np.float64(growth) ** exponent)
    return F32(_f32(params.base) * power)


def _yarn(params: RopeParams, pos_freqs: Float32Array) -> tuple[Float32Array, float]:
    factor = _required(params.factor)
    dim, original = params.d_model, _required(params.original_max_position_embeddings)
    extrapolation = _reciprocal(pos_freqs)
    interpolation = _reciprocal((_f32(factor) * pos_freqs).astype(F32))

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(params.base))

    low: float = correction_dim(params.beta_fast or 32)
    high: float = correction_dim(params.beta_slow or 1)
    if params.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    linear = (np.arange(dim // 2, dtype=F32) - _f32(low)).astype(F32) / _f32(high - low)
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
    factor = _f32(_required(params.factor))
    low_factor = 1.0 if params.low_freq_factor is None else params.low_freq_factor
    high_factor = 4.0 if params.high_freq_factor is None else params.high_freq_factor
    original = params.original_max_position_embeddings or 8192
    # Python floats, compared with the float32 wavelengths after a cast to float32.
    low_wavelength, high_wavelength = original / low_factor, original / high_factor
    wavelength = (_reciprocal(inv_freq) * _f32(2 * math.pi)).astype(F32)
    scaled = np.where(wavelength > _f32(low_wavelength), (inv_freq / factor).astype(F32), inv_freq)
    smooth = (_reciprocal(wavelength) * _f32(original)).astype(F32)
    smooth = ((smooth - _f32(low_factor)).astype(F32) / _f32(high_factor - low_factor)).astype(F32)
    blended = ((F32(1) - smooth).astype(F32) * scaled).astype(F32) / factor
    blended = (blended.astype(F32) + (smooth * scaled).astype(F32)).astype(F32)
    medium = ~(wavelength < _f32(high_wavelength)) & ~(wavelength > _f32(low_wavelength))
    return np.where(medium, blended, scaled).astype(F32)


def _longrope(params: RopeParams, powers: Float32Array, seq_len: int) -> tuple[Float32Array, float]:
    original = _required(params.original_max_position_embeddings)
    factors = params.long_factor if seq_len > original else params.short_factor
    ext = np.array(_required(factors), dtype=np.float64).astype(F32)
    inv_freq = _reciprocal((ext * powers).astype(F32))
    attention = params.attention_factor
    if attention is None:
        factor = params.factor or 1.0
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    return inv_freq, float(attention)


def _sincos_f32(angles: Float32Array) -> tuple[Float32Array, Float32Array]:
    """Correctly rounded float32 ``sin`` and ``cos`` of float32 angles (exact float64 reduction)."""
    wide = angles.astype(np.float64)
    return np.sin(wide).astype(F32), np.cos(wide).astype(F32)


def _angles(positions: npt.NDArray[np.int64], omega: Float32Array) -> Float32Array:
    """``fl32(fl32(pos) · ω)``: positions past 2^24 round to float32 first, as ``.float()`` does."""
    return (positions.astype(F32)[:, None] * omega[None, :]).astype(F32)


def rope_encode(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str
) -> npt.NDArray[np.floating]:
    """The component as transformers' rotary module computes it in float32, then cast to ``dtype``.

    ``cos_sin`` is ``(2, n, d)``, ``cos``/``sin`` ``(n, d)`` expanded to the layout, ``angle``
    ``(n, d/2)`` the float32 angles, ``inv_freq`` ``(d/2,)``.

    >>> from posenc.schemes.rope.maths import RopeParams
    >>> rope_encode(RopeParams(d_model=2), np.array([1]), "float64", "sin").tolist()
    [[0.8414709568023682, 0.8414709568023682]]
    """
    seq_len = int(positions.max()) + 1 if positions.size else 1
    inv_freq, attention = rope_inv_freq(params, seq_len)
    if component == "inv_freq":
        return inv_freq.astype(dtype)
    half = params.d_model // 2
    rows = max(1, _BLOCK_ELEMENTS // half)
    if component == "angle":
        angles = np.empty((len(positions), half), dtype=dtype)
        for start in range(0, len(positions), rows):
            checkpoint()
            block = slice(start, start + rows)
            angles[block] = _angles(positions[block], inv_freq)
        return angles
    parts = {"cos_sin": (1, 0), "cos": (1,), "sin": (0,)}[component]
    out = np.empty((len(parts), len(positions), params.d_model), dtype=dtype)
    scale = _f32(attention)
    for start in range(0, len(positions), rows):
        checkpoint()
        block = slice(start, start + rows)
        pair = _sincos_f32(_angles(positions[block], inv_freq))
        for k, which in enumerate(parts):
            value = (pair[which] * scale).astype(F32)
            if params.layout == "split":
                out[k, block, :half], out[k, block, half:] = value, value
            else:
                out[k, block, 0::2], out[k, block, 1::2] = value, value
    return out if component == "cos_sin" else out[0]


def sinusoidal_frequencies(params: SinusoidalParams) -> Float32Array:
    """The library's float32 frequencies for ``params.convention`` (see the module docstring).

    The ``exp`` form lands where the rounding of ``−ln base / d`` takes it: here one float32 ulp
    below ``fl32(0.1)``, which rope's ``1 / base^(2i/d)`` gives.

    >>> from posenc.schemes.sinusoidal.maths import SinusoidalParams
    >>> sinusoidal_frequencies(SinusoidalParams(d_model=4, base=100.0)).tolist()
    [1.0, 0.09999999403953552]
    """
    base, d = params.base, params.d_model
    if params.convention == "vaswani":
        step = _f32(-math.log(base) / d)
        return _exp((np.arange(0, d, 2).astype(F32) * step).astype(F32))
    h = d // 2
    if params.convention == "fairseq":
        step = _f32(-(math.log(base) / max(h - 1, 1)))
    else:  # tensor2tensor: log(max/min) is a Python float divided by a float32 tensor
        step = -(_f32(math.log(base)) / _f32(max(h - 1, 1)))
    return _exp((np.arange(h).astype(F32) * step).astype(F32))


def sinusoidal_encode(
    params: SinusoidalParams, positions: npt.NDArray[np.int64], dtype: str
) -> npt.NDArray[np.floating]:
    """The library's float32 table for ``params.convention``, cast to ``dtype``: ``(n, d_model)``.

    >>> from posenc.schemes.sinusoidal.maths import SinusoidalParams
    >>> sinusoidal_encode(SinusoidalParams(d_model=2), np.array([1]), "float64").tolist()
    [[0.8414709568023682, 0.5403022766113281]]
    """
    omega = sinusoidal_frequencies(params)
    out = np.zeros((len(positions), params.d_model), dtype=dtype)
    sines, cosines = params.column_views(out)
    cosine_count = cosines.shape[1]
    rows = max(1, _BLOCK_ELEMENTS // max(len(omega), 1))
    for start in range(0, len(positions) if len(omega) else 0, rows):
        checkpoint()
        block = slice(start, start + rows)
        sin, cos = _sincos_f32(_angles(positions[block], omega))
        sines[block], cosines[block] = sin, cos[:, :cosine_count]
    if params.padding_idx is not None:
        out[positions == params.padding_idx] = 0
    return out


def sinusoidal_cost(params: SinusoidalParams, count: int, dtype: str) -> Cost:
    """Peak bytes and work of :func:`sinusoidal_encode`: the output, and per block of
    ``_BLOCK_ELEMENTS`` angles their float32 positions and products, the float64 widening, the
    float64 sines and cosines and their float32 roundings (at most 48 bytes an angle); and per
    row the int64 position and the masks that check it (16 bytes, what a narrow table feels)."""
    values = count * params.d_model
    angles = min(_BLOCK_ELEMENTS, count * max(params.d_model // 2, 1) + params.d_model)
    held = values * np.dtype(dtype).itemsize + 16 * count + 48 * angles + 65536
    return Cost(held, values * 48)
