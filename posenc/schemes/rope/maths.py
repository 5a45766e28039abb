"""Rotary position embedding (RoFormer, Su et al. 2021) and its long-context scalings.

Pair ``i`` of a ``d_model``-wide head is rotated by ``pos · ω_i`` with ``ω_i = base^(-2i/d)``
before scaling. ``interleaved`` rotates pairs ``(2i, 2i+1)`` (RoFormer, GPT-J); ``split`` rotates
``(i, i + d/2)`` (Hugging Face ``rotate_half``). The scalings follow the rope initialisation of
Hugging Face transformers — same parameters, defaults and results — but evaluated exactly
(scalars at 60 digits, each frequency in triple-doubles, rounded once) rather than in float32:

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

``cos`` and ``sin`` are multiplied by the attention factor, as transformers does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import lru_cache
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.declare import check_ranges, param
from posenc.errors import InconsistentError
from posenc.numerics import costs, kernels
from posenc.numerics import doubledouble as dd
from posenc.numerics.exact import (
    Turns,
    consecutive_positions,
    fresh_output,
    radians_and_turns,
    sincos,
)
from posenc.numerics.rotation import fill_consecutive
from posenc.schemes.rope import framework

Layout = Literal["interleaved", "split"]
Scaling = Literal["none", "linear", "dynamic", "yarn", "llama3", "longrope"]
Component = Literal["cos_sin", "cos", "sin", "angle", "inv_freq"]
COMPONENTS: tuple[str, ...] = get_args(Component)

_NEEDS: dict[str, tuple[str, ...]] = {
    "none": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor",),
    "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
}
_TAKES: dict[str, frozenset[str]] = {
    "none": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor", "original_max_position_embeddings"}),
    "yarn": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "beta_fast",
            "beta_slow",
            "attention_factor",
            "mscale",
            "mscale_all_dim",
            "truncate",
        }
    ),
    "llama3": frozenset(
        {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}
    ),
    "longrope": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "short_factor",
            "long_factor",
        }
    ),
}


# The smallest factor a frequency may be divided by. The exact angle reduction takes pos·ω mod
# 2π from ω's turns in double-double (106 bits): at positions near 2^31 that stays correctly
# rounded up to ω ≈ 2^16 radians per position (measured: a factor of 2^-16 exact, 10^-6 within
# an ulp, 10^-9 a hundred ulps off, 10^-300 cosines of 10^270). A faster rope has no use.
SMALLEST_DIVISOR = 2.0**-16


@dataclass(frozen=True)
class RopeParams:
    d_model: int = param(
        doc="the rotated (head) dimension; even, since pairs rotate", ge=2, le=65536, multiple_of=2
    )
    base: float = param(10000.0, doc="rope_theta; 1 < base ≤ 1e12", gt=1, le=1e12)
    layout: Layout = param(
        "split",
        doc="split: pairs (i, i+d/2), transformers' rotate_half; interleaved: pairs (2i, 2i+1), "
        "RoFormer and GPT-J",
    )
    scaling: Scaling = param(
        "none",
        doc="long-context scaling, as transformers computes it; each takes the parameters "
        "whose description names it",
    )
    factor: float | None = param(
        None,
        doc="linear, dynamic, yarn, llama3 (required); longrope. At least 2^-16: it divides "
        "frequencies, and angles are served exactly up to 2^16 radians per position",
        ge=SMALLEST_DIVISOR,
        le=1e6,
    )
    original_max_position_embeddings: int | None = param(
        None,
        doc="the trained context length: dynamic, yarn, longrope (required); llama3 (8192)",
        ge=1,
        le=2**31 - 1,
    )
    low_freq_factor: float | None = param(None, doc="llama3 (default 1)", gt=0, le=1e6)
    high_freq_factor: float | None = param(None, doc="llama3 (default 4)", gt=0, le=1e6)
    beta_fast: float | None = param(None, doc="yarn (default 32)", gt=0, le=1e6)
    beta_slow: float | None = param(None, doc="yarn (default 1)", gt=0, le=1e6)
    attention_factor: float | None = param(
        None, doc="yarn, longrope: overrides the inferred factor", gt=0, le=1e6
    )
    mscale: float | None = param(None, doc="yarn", gt=0, le=1e6)
    mscale_all_dim: float | None = param(None, doc="yarn", gt=0, le=1e6)
    truncate: bool | None = param(None, doc="yarn: round the ramp's ends outwards (default true)")
    short_factor: tuple[float, ...] | None = param(
        None,
        doc="longrope (required): d_model/2 factors, used up to original_max_position_embeddings; "
        "each at least 2^-16",
        ge=SMALLEST_DIVISOR,
        le=1e6,
        min_items=1,
        max_items=32768,
    )
    long_factor: tuple[float, ...] | None = param(
        None,
        doc="longrope (required): d_model/2 factors, used beyond it; each at least 2^-16",
        ge=SMALLEST_DIVISOR,
        le=1e6,
        min_items=1,
        max_items=32768,
    )
    recipe: framework.Recipe = param(
        "exact",
        doc="exact: correctly rounded; framework: transformers' own float32 computation",
    )

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.recipe == "framework" and self.scaling == "dynamic" and self.d_model < 4:
            raise InconsistentError("d_model", "must be ≥ 4 for dynamic scaling: d/(d−2) is used")
        for name in _NEEDS[self.scaling]:
            if getattr(self, name) is None:
                raise InconsistentError(name, f"is required with scaling={self.scaling}")
        for name in _TAKES_ANY - _TAKES[self.scaling]:
            if getattr(self, name) is not None:
                raise InconsistentError(name, f"does not apply to scaling={self.scaling}")
        for name in ("short_factor", "long_factor"):
            values = getattr(self, name)
            if values is not None and (
                len(values) != self.d_model // 2 or not all(v > 0 for v in values)
            ):
                raise InconsistentError(
                    name,
                    f"must list d_model/2 = {self.d_model // 2} positive numbers, "
                    f"got {len(values)}",
                )


_TAKES_ANY = frozenset().union(*_TAKES.values())


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
    attention = 1.0
    if params.scaling == "yarn":
        gain, attention = _yarn(params, h)
        rows = dd.multiply(rows, gain)
    elif params.scaling == "llama3":
        rows = dd.multiply(rows, _llama3(params, dd.take(rows, 1)))
    elif params.scaling == "longrope":
        extension, attention = _longrope(params, seq_len)
        rows = dd.divide(rows, extension)
    return Turns.from_rows(rows), attention


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
    beta_fast = params.beta_fast or 32.0
    beta_slow = params.beta_slow or 1.0
    d, original = params.d_model, params.original_max_position_embeddings

    def correction_dim(rotations: float) -> float:
        # In float64, as transformers decides the ramp's ends.
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(params.base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if params.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
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


def sequence_length(positions: npt.NDArray[np.int64]) -> int:
    """The length that sets dynamic and longrope scaling: one past the largest position."""
    return int(positions.max()) + 1 if positions.size else 1


def shape(params: RopeParams, count: int, component: str) -> tuple[int, ...]:
    d = params.d_model
    return {
        "cos_sin": (2, count, d),
        "cos": (count, d),
        "sin": (count, d),
        "angle": (count, d // 2),
        "inv_freq": (d // 2,),
    }[component]


def encode(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str = "cos_sin"
) -> npt.NDArray[np.floating]:
    """The chosen component for ``positions``, rounded once to ``dtype``.

    >>> encode(RopeParams(d_model=4), np.array([1]), "float64", "cos").round(4).tolist()
    [[0.5403, 1.0, 0.5403, 1.0]]
    """
    if params.recipe == "framework":
        return framework.rope_encode(params, positions, dtype, component)
    if _compiled(component, dtype) and _consecutive(positions):
        # A table after all: half the transcendental work, by the compiled loops.
        return table(params, len(positions), int(positions[0]), dtype, component)
    return _encode_exact(params, positions, dtype, component)


def _encode_exact(
    params: RopeParams, positions: npt.NDArray[np.int64], dtype: str, component: str
) -> npt.NDArray[np.floating]:
    turns, attention = frequencies(params, sequence_length(positions))
    if component == "inv_freq":
        return turns.radians.astype(dtype)
    if component == "angle":
        return (positions.astype(np.float64)[:, None] * turns.radians).astype(dtype)
    sin, cos = sincos(positions, turns)
    expanded = {"cos": [cos], "sin": [sin], "cos_sin": [cos, sin]}[component]
    tables = [_expand(part * attention, params.layout) for part in expanded]
    stacked = tables[0] if len(tables) == 1 else np.stack(tables)
    return stacked.astype(dtype)


_TABLES = {"cos_sin": (1, 0), "cos": (-1, 0), "sin": (0, -1)}  # (sin plane, cos plane)


def _compiled(component: str, dtype: str) -> bool:
    return component in _TABLES and np.dtype(dtype) in (np.float32, np.float64)


def _consecutive(positions: npt.NDArray[np.int64]) -> bool:
    return bool(positions.size) and bool(np.all(np.diff(positions) == 1))


def table(
    params: RopeParams,
    seq_len: int,
    offset: int = 0,
    dtype: str = "float32",
    component: str = "cos_sin",
    threads: int = 1,
) -> npt.NDArray[np.floating]:
    """``component`` for positions ``offset … offset + seq_len - 1``.

    ``cos``/``sin`` repeat ``d/2`` distinct columns, so only ``seq_len · d/2`` values are
    computed and each is written twice. float32 tables are built by rotation from exact
    anchors, as the sinusoid's (within ``0.5 + 2^-14`` ulp of the exact values, values below
    2^-10 recomputed exactly); float64 ones on the exact path. Both by the compiled loops of
    :mod:`.kernels`, bit for bit :func:`table_reference`; ``threads`` splits the rows.

    >>> table(RopeParams(d_model=4), 2, 0, "float32", "cos")[1].tolist()
    [0.5403022766113281, 0.9999499917030334, 0.5403022766113281, 0.9999499917030334]
    """
    positions = consecutive_positions(seq_len, offset)
    if params.recipe != "exact" or not _compiled(component, dtype):
        return encode(params, positions, dtype, component)
    turns, attention = frequencies(params, offset + seq_len)
    sin_plane, cos_plane = _TABLES[component]
    out = fresh_output((2 if component == "cos_sin" else 1, seq_len, params.d_model), dtype)
    mode = kernels.ROPE_SPLIT if params.layout == "split" else kernels.ROPE_INTERLEAVED
    store = kernels.Store(mode, len(turns), sin_plane, cos_plane, attention)
    fill = kernels.exact_table if np.dtype(dtype) == np.float64 else kernels.rotated_table
    fill(out, offset, turns, store, threads)
    result: npt.NDArray[np.floating] = out if component == "cos_sin" else out[0]
    return result


# Bytes and work of the frequencies (numerics.doubledouble) when they are not cached: measured
# 260-425 bytes at the peak (yarn and llama3 blend in triple-doubles too).
_FREQUENCY_COST = Cost(bytes=1024, work=5_000)


def table_cost(
    params: RopeParams, seq_len: int, dtype: str, component: str = "cos_sin", threads: int = 1
) -> Cost:
    """Peak working bytes (the output included) and work of :func:`table`, from the
    parameters alone: an upper bound, frequencies taken as not cached.

    >>> table_cost(RopeParams(d_model=128), 8192, "float32").bytes < 1.25 * 2 * 8192 * 128 * 4
    True
    """
    h = params.d_model // 2
    values = math.prod(shape(params, seq_len, component))
    out = values * np.dtype(dtype).itemsize
    frequencies = Cost(_FREQUENCY_COST.bytes * h, _FREQUENCY_COST.work * h)
    if not _compiled(component, dtype):
        # The exact path over (n, h), its ~30 temporaries, expanded and stacked in float64.
        working = Cost(240 * seq_len * h + 24 * values, 40 * seq_len * h + 4 * values + 100_000)
    elif np.dtype(dtype) == np.float64:
        working = kernels.exact_cost(seq_len, h, values, threads)
    else:
        working = kernels.rotated_cost(seq_len, h, values, threads)
    # 64 KiB: the Python objects and small arrays around the buffers.
    return frequencies.peak(Cost(out + 65536, 0) + working)


def table_reference(
    params: RopeParams, seq_len: int, offset: int, dtype: str, component: str = "cos_sin"
) -> npt.NDArray[np.floating]:
    """:func:`table` in NumPy alone: the reference the compiled loops are tested against."""
    positions = consecutive_positions(seq_len, offset)
    if np.dtype(dtype) == np.float64 or component not in _TABLES:
        return _encode_exact(params, positions, dtype, component)
    turns, attention = frequencies(params, offset + seq_len)
    half = np.empty((2, seq_len, len(turns)))  # sin, cos

    def place_rows(start: int, rows: npt.NDArray[np.float64]) -> None:
        half[:, start : start + len(rows)] = rows.reshape(len(rows), -1, 2).transpose(2, 0, 1)

    def place_values(
        rows: npt.NDArray[np.intp], columns: npt.NDArray[np.intp], values: npt.NDArray[np.float64]
    ) -> None:
        half[columns % 2, rows, columns // 2] = values

    fill_consecutive(offset, seq_len, turns, place_rows, place_values)
    expanded = {"cos": [half[1]], "sin": [half[0]], "cos_sin": [half[1], half[0]]}[component]
    tables = [_expand(part * attention, params.layout) for part in expanded]
    stacked = tables[0] if len(tables) == 1 else np.stack(tables)
    return stacked.astype(dtype)


def _expand(half: npt.NDArray[np.float64], layout: Layout) -> npt.NDArray[np.float64]:
    """(n, d/2) → (n, d) the way the reference implementations expand cos and sin."""
    if layout == "split":
        return np.concatenate([half, half], axis=1)
    return np.repeat(half, 2, axis=1)


def rotate(
    params: RopeParams, vectors: npt.NDArray[np.float64], positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """``x·cos + rotate(x)·sin`` for each vector at its position, in float64.

    >>> rotate(RopeParams(d_model=2), np.array([[1.0, 0.0]]), np.array([0])).tolist()
    [[1.0, 0.0]]
    """
    if params.recipe == "framework":
        cos_sin = framework.rope_encode(params, positions, "float64", "cos_sin")
        return rotate_with(params.layout, vectors, cos_sin[0], cos_sin[1])
    turns, attention = frequencies(params, sequence_length(positions))
    sin, cos = sincos(positions, turns)
    cos, sin = _expand(cos * attention, params.layout), _expand(sin * attention, params.layout)
    return rotate_with(params.layout, vectors, cos, sin)


def rotate_with(
    layout: Layout, x: npt.NDArray[np.float64], cos: npt.NDArray[Any], sin: npt.NDArray[Any]
) -> npt.NDArray[np.float64]:
    """``x·cos + rotate_half(x)·sin`` (or GPT-J's every-two rotation) with given cos and sin,
    already expanded to the layout; ``x`` is ``(..., d)``."""
    h = x.shape[-1] // 2
    turned = np.empty_like(x)
    if layout == "split":
        turned[..., :h], turned[..., h:] = -x[..., h:], x[..., :h]
    else:
        turned[..., 0::2], turned[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    result: npt.NDArray[np.float64] = x * cos + turned * sin
    return result


def cost(params: Any, count: int, dtype: str, component: str) -> Cost:
    """A table by the compiled loops (:func:`table_cost`), or sin and cos of every
    (position, pair) in float64, scaled, expanded and stacked (measured 69 bytes per
    ``count·d_model`` at the peak): whichever costs more. The frequencies alone (``inv_freq``)
    cost their computation, nothing that grows with ``count``."""
    if component == "inv_freq":
        h = params.d_model // 2
        return Cost(
            _FREQUENCY_COST.bytes * h + params.d_model * 16 + costs.SCRATCH,
            _FREQUENCY_COST.work * h,
        )
    pairs = count * params.d_model
    listed = Cost(pairs * 80 + costs.SCRATCH, pairs * costs.TRANSCENDENTAL)
    return costs.larger(table_cost(params, count, dtype, component), listed)


def magnitude(params: RopeParams, first: int, last: int, component: str) -> float:
    """The largest |value| of ``component`` for positions up to ``last``: the attention factor
    for cos and sin, the largest frequency, or the largest angle (``last`` times it)."""
    turns, attention = frequencies(params, last + 1)
    top = float(turns.radians.max())
    return {"inv_freq": top, "angle": last * top}.get(component, attention)
