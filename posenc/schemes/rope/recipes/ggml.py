"""llama.cpp's rope (``recipe=ggml``): the parameters llama.cpp derives from a model's rope, and
ggml-cpu's float32 computation of cos and sin from them, operation for operation.

llama.cpp 0c1e57098 (the ``llama-cpp-python`` 0.3.36 sdist's ``vendor/llama.cpp``):

- ``ggml/src/ggml-cpu/ops.cpp``: ``theta_scale = powf(freq_base, -2.0f/n_dims)``; for each
  position ``theta = (float) pos``, then for each pair ``rope_yarn(theta / ff, …)`` and
  ``theta *= theta_scale`` — the angle of pair ``i`` is ``i`` float32 products from the position,
  not ``pos · ω_i``. ``rope_yarn``: ``theta_interp = freq_scale · theta_extrap``; with
  ``ext_factor ≠ 0`` the ramp mixes the two (``theta_interp·(1 − mix) + theta_extrap·mix``, one
  fused multiply-add where the compiler contracts it, as GCC does for a processor with FMA) and
  ``mscale *= 1 + 0.1·logf(1/freq_scale)``; then ``cosf(theta)·mscale``, ``sinf(theta)·mscale``.
- ``ggml/src/ggml.c``: ``ggml_rope_yarn_corr_dims`` in float32 (``floorf``/``ceilf`` of
  ``n_dims·logf(n_ctx_orig / (beta·2π)) / (2·logf(base))``).
- ``src/llama-context.cpp``: YaRN's ``ext_factor = 1`` and its attention factor
  ``get_mscale(factor, 1) / (1 + 0.1·logf(factor))`` (DeepSeek-2's ``yarn_log_mul`` rule gives
  ``1 / (1 + 0.1·logf(factor))``), times the file's ``rope.scaling.attn_factor``; a config's own
  YaRN ``attention_factor`` is overwritten there, so llama.cpp does not apply it.
- the converter (``conversion/llama.py``, ``phi.py``): Llama 3's ``rope_freqs`` factor tensor,
  computed in torch float32; LongRoPE's ``rope_factors_long``/``_short`` as the config lists them,
  chosen by the context llama.cpp runs with (``n_ctx``, padded to 256, ``> n_ctx_orig``: long),
  and the attention factor ``sqrt(1 + ln(factor)/ln(original))`` written as
  ``rope.scaling.attn_factor``.

Each argument and factor tensor is held to the rope nodes llama.cpp itself built for files its
converter wrote (tests/gguf/records), bit for bit.

libm's ``powf``, ``logf``, ``cosf`` and ``sinf`` are this machine's (glibc's: numba's float32
``math.cos`` is a call to ``cosf``): a ggml linked against the same libm gives the same bits.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numba
import numpy as np
import numpy.typing as npt

from posenc.errors import NotApplicableError
from posenc.numerics.float32 import F32, Float32Array, power, reciprocal, scalar
from posenc.numerics.fused import fma32
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes.llama_cpp import RopeCall, libm, yarn_attention, yarn_growth
from posenc.schemes.rope.recipes.rows import Halves, Rows


def check(params: RopeParams) -> None:
    """Refuse, from the parameters alone, a rope llama.cpp does not implement."""
    if params.scaling == "dynamic":
        raise NotApplicableError(
            "recipe", "rope", "llama.cpp (recipe=ggml) implements no dynamic (NTK) scaling"
        )
    if params.rotary_pairs is not None:
        raise NotApplicableError(
            "recipe", "rope", "recipe=ggml does not serve rotary_pairs (proportional rope)"
        )


def derive(params: RopeParams) -> RopeCall:
    """What llama.cpp passes to ggml for a model whose rope is ``params``.

    >>> derive(RopeParams(d_model=8, scaling="linear", factor=4.0)).freq_scale
    0.25
    """
    check(params)
    scaling = params.scaling
    factor = float(params.factor) if params.factor is not None else 1.0
    freq_scale, ext_factor, attn_factor = 1.0, 0.0, 1.0
    factors = _converter_factors(params)
    if scaling == "linear":
        freq_scale = float(F32(1.0) / F32(factor))
    elif scaling == "yarn":
        freq_scale = float(F32(1.0) / F32(factor))
        ext_factor = 1.0
        attn_factor = float(_yarn_attention(params, F32(1.0) / F32(freq_scale)))
    elif scaling == "longrope":
        attn_factor = float(F32(_longrope_attention(params)))
    if params.freq_factors is not None:
        factors = tuple(float(F32(f)) for f in params.freq_factors)
    return RopeCall(
        n_dims=params.d_model,
        rope_type="norm" if params.layout == "interleaved" else "neox",
        n_ctx_orig=params.original_max_position_embeddings or 0,
        freq_base=float(F32(params.base)),
        freq_scale=float(F32(freq_scale)),
        ext_factor=ext_factor,
        attn_factor=attn_factor,
        beta_fast=float(F32(params.beta_fast or 32.0)),
        beta_slow=float(F32(params.beta_slow or 1.0)),
        freq_factors=factors,
    )


def as_converted(params: RopeParams) -> RopeParams:
    """The rope as llama.cpp runs a model converted from it: YaRN's ``beta_fast`` and
    ``beta_slow`` are written to the file but read back by Grok's and Mistral 3's loaders only;
    every other architecture takes 32 and 1 (``llama-hparams.h``)."""
    return replace(params, beta_fast=None, beta_slow=None)


def _yarn_attention(params: RopeParams, factor: np.float32) -> np.float32:
    """llama-context.cpp: the attention factor llama.cpp hands ggml for YaRN."""
    if params.mscale_all_dim:
        # DeepSeek-2's converter writes yarn_log_mul = 0.1·mscale_all_dim and llama.cpp takes
        # mscale equal to it: the ratio is x/x.
        log_mul = F32(0.1 * params.mscale_all_dim)
        return yarn_attention(factor, log_mul, log_mul)
    return yarn_attention(factor)


def _longrope_attention(params: RopeParams) -> float:
    """phi.py's ``rope.scaling.attn_factor`` (in double), unless the rope states its own."""
    if params.attention_factor is not None:
        return float(params.attention_factor)
    factor = params.factor or 1.0
    original = params.original_max_position_embeddings or 1
    return math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1.0 else 1.0


def _converter_factors(params: RopeParams) -> tuple[float, ...] | None:
    """The factor tensor llama.cpp's converter writes for this rope (``rope_freqs`` for Llama 3,
    the long or short LongRoPE factors by ``n_ctx``), or None."""
    if params.scaling == "llama3":
        return tuple(float(f) for f in llama3_factors(params))
    if params.scaling == "longrope":
        original = params.original_max_position_embeddings or 0
        chosen = params.long_factor if n_ctx(params) > original else params.short_factor
        return tuple(float(F32(f)) for f in chosen or ())
    return None


def n_ctx(params: RopeParams) -> int:
    """The context llama.cpp runs with: ``n_ctx``, else the model's training context
    (``factor × original_max_position_embeddings`` for LongRoPE), llama.cpp's default, padded
    to a multiple of 256 as llama_context pads it (``GGML_PAD(n_ctx, 256)``), so a context of
    1900 runs as 2048 and takes the long factors of a model trained on 2000.

    >>> n_ctx(RopeParams(d_model=2, scaling="longrope", factor=2.0, recipe="ggml",
    ...     original_max_position_embeddings=2000, short_factor=(1,), long_factor=(2,), n_ctx=1900))
    2048
    """
    given = params.n_ctx
    if given is None:
        given = int((params.original_max_position_embeddings or 0) * (params.factor or 1.0))
    return -(-given // 256) * 256


def llama3_factors(params: RopeParams) -> Float32Array:
    """``rope_freqs`` as ``conversion/llama.py`` computes it: torch float32 frequencies
    (``1 / base ** (arange(0, d, 2) / d)``), each wavelength ``2π / freq`` a float32 tensor
    compared with Python floats, the smooth band's ``1 / ((1 − s)/factor + s)`` in float32.

    >>> llama3_factors(RopeParams(d_model=8, scaling="llama3", factor=8.0)).tolist()[0]
    1.0
    """
    dim = params.d_model
    factor = float(params.factor or 8.0)
    low = 1.0 if params.low_freq_factor is None else params.low_freq_factor
    high = 4.0 if params.high_freq_factor is None else params.high_freq_factor
    old = params.original_max_position_embeddings or 8192
    exponents = (np.arange(0, dim, 2, dtype=F32) / scalar(dim)).astype(F32)
    freqs = reciprocal(power(scalar(params.base), exponents))
    wavelength = (reciprocal(freqs) * scalar(2 * math.pi)).astype(F32)
    short, long = wavelength < scalar(old / high), wavelength > scalar(old / low)
    band = ~short & ~long
    # The smooth band, computed where it is: Llama 4's (low = high frequency factor) is empty
    # but for a wavelength exactly on its edge, where the converter divides by zero too.
    with np.errstate(divide="ignore", invalid="ignore"):
        smooth = (reciprocal(wavelength[band]) * scalar(old)).astype(F32) - scalar(low)
        smooth = (smooth.astype(F32) / scalar(high - low)).astype(F32)
    blend = (((F32(1) - smooth).astype(F32) / scalar(factor)).astype(F32) + smooth).astype(F32)
    out = np.where(long, scalar(factor), F32(1)).astype(F32)
    out[band] = reciprocal(blend)
    return out


def corr_dims(rope: RopeCall) -> tuple[np.float32, np.float32]:
    """``ggml_rope_yarn_corr_dims``: the first and last pair of YaRN's ramp, in float32."""

    def corr_dim(rotations: float) -> np.float32:
        turns = F32(F32(F32(rotations) * F32(2)) * F32(math.pi))
        ratio = F32(F32(rope.n_ctx_orig) / turns)
        numerator = F32(F32(rope.n_dims) * libm("logf", ratio))
        return F32(numerator / F32(2 * libm("logf", rope.freq_base)))

    start = libm("floorf", corr_dim(rope.beta_fast))
    end = libm("ceilf", corr_dim(rope.beta_slow))
    return F32(max(F32(0), start)), F32(min(F32(rope.n_dims - 1), end))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _cache_rows(
    positions: npt.NDArray[np.int64],
    factors: Float32Array,
    theta_scale: np.float32,
    freq_scale: np.float32,
    ext_factor: np.float32,
    mscale: np.float32,
    low: np.float32,
    high: np.float32,
    cos: Float32Array,
    sin: Float32Array,
    angle: Float32Array,
) -> None:
    # ggml_rope_cache_init and rope_yarn for each position, as ops.cpp writes them.
    one = np.float32(1.0)
    width = max(np.float32(0.001), np.float32(high - low))
    for row in range(positions.shape[0]):
        theta = np.float32(positions[row])
        for pair in range(factors.shape[0]):
            extrapolated = np.float32(theta / factors[pair])
            interpolated = np.float32(freq_scale * extrapolated)
            value = interpolated
            if ext_factor != 0:
                y = np.float32(np.float32(np.float32(pair) - low) / width)
                ramp = np.float32(one - min(one, max(np.float32(0), y)))
                mix = np.float32(ramp * ext_factor)
                value = fma32(interpolated, np.float32(one - mix), np.float32(extrapolated * mix))
            angle[row, pair] = value
            cos[row, pair] = np.float32(np.float32(math.cos(value)) * mscale)
            sin[row, pair] = np.float32(np.float32(math.sin(value)) * mscale)
            theta = np.float32(theta * theta_scale)


def frequencies(rope: RopeCall) -> tuple[npt.NDArray[np.float64], float]:
    """The frequency of each pair and the factor of cos and sin that the call ``rope`` states:
    ggml's formulas (``θ_i = base^(−2i/n) / f_i``, YaRN's ramp between ``freq_scale·θ_i`` and
    ``θ_i``, ``attn_factor`` times YaRN's ``1 + 0.1·ln(1/freq_scale)``) in float64, but for the
    ramp's ends, in float32 as ggml decides them (the doubles' formula can land on the other
    side of a whole pair). Not :func:`rows_of`'s float32: its angles are repeated products,
    pair ``i`` off by up to ``i·2^-24`` relative (2·10^-3 at 32768 pairs), which is the
    runtime's rounding, not the rope the file states (the GGUF check compares the latter).

    >>> frequencies(derive(RopeParams(d_model=4, scaling="linear", factor=2.0)))[0].tolist()
    [0.5, 0.005]
    """
    n = rope.n_dims
    i = np.arange(n // 2, dtype=np.float64)
    extrapolated = rope.freq_base ** (-2.0 * i / n)
    if rope.freq_factors is not None:
        extrapolated = extrapolated / np.asarray(rope.freq_factors[: n // 2], np.float64)
    interpolated = rope.freq_scale * extrapolated
    if rope.ext_factor == 0:
        return interpolated, rope.attn_factor
    low, high = (float(end) for end in corr_dims(rope))
    ramp = (1 - np.clip((i - low) / max(0.001, high - low), 0, 1)) * rope.ext_factor
    growth = 1 + 0.1 * math.log(1 / rope.freq_scale)
    return interpolated * (1 - ramp) + extrapolated * ramp, rope.attn_factor * growth


def prepare(params: RopeParams, seq_len: int) -> Rows:
    """ggml-cpu's rows for ``params`` (``seq_len`` is unused: llama.cpp has no dynamic rope)."""
    return rows_of(derive(params))


def rows_of(rope: RopeCall) -> Rows:
    """ggml-cpu's rows for the call ``rope`` (ggml_rope_cache_init and rope_yarn): the GGUF
    check reads a file's call through these too."""
    half = rope.n_dims // 2
    theta_scale = libm("powf", rope.freq_base, F32(F32(-2.0) / F32(rope.n_dims)))
    low, high = corr_dims(rope)
    mscale = F32(rope.attn_factor)
    if rope.ext_factor != 0:
        # rope_yarn: mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale)
        mscale = F32(mscale * yarn_growth(F32(F32(1) / F32(rope.freq_scale))))
    factors = np.array(rope.freq_factors or (1.0,) * half, dtype=F32)[:half]
    constants = (theta_scale, F32(rope.freq_scale), F32(rope.ext_factor), mscale, low, high)

    def rows(positions: npt.NDArray[np.int64]) -> Halves:
        cos, sin, angle = (np.empty((len(positions), half), dtype=F32) for _ in range(3))
        _cache_rows(positions.astype(np.int64), factors, *constants, cos, sin, angle)
        return cos, sin, angle

    return rows
