"""The frequencies against mpmath at 250 bits: random bases and widths, every rope scaling.

Each served frequency is a float64 in radians, which must be the correctly rounded exact value,
and a double-double ``hi + lo`` in turns per position, which the exact angle reduction needs
within 2^-104 relative (``hi`` correctly rounded, ``lo`` the correctly rounded rest).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import mpmath
import numpy as np
import pytest

from posenc.numerics.exact import Turns
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import SMALLEST_DIVISOR, RopeParams
from posenc.schemes.rope.scaling import frequencies, scaled
from posenc.schemes.sinusoidal import maths as sinusoidal

mpmath.mp.prec = 250
RNG_SEEDS = range(6)


def _base(rng: np.random.Generator) -> float:
    # Bases from just above 1 to the largest allowed, spread in log-log.
    return float(1 + 10 ** rng.uniform(-6, 12))


def _width(rng: np.random.Generator) -> int:
    return int(2 * rng.integers(1, 600))


def _assert_exact(turns: Turns, omega: list[Any]) -> None:
    assert len(turns) == len(omega)
    for i, w in enumerate(omega):
        nu = w / (2 * mpmath.pi)
        assert turns.radians[i] == float(w), (i, turns.radians[i], w)
        hi, lo = mpmath.mpf(float(turns.hi[i])), mpmath.mpf(float(turns.lo[i]))
        assert turns.hi[i] == float(nu), (i, turns.hi[i], nu)
        assert abs(hi + lo - nu) <= nu * mpmath.mpf(2) ** -104, (i, hi + lo - nu)
        assert turns.lo[i] == float(nu - hi), (i, turns.lo[i], nu - hi)


def _omega(base: Any, d: int) -> list[Any]:
    return [mpmath.power(base, -mpmath.mpf(2 * i) / d) for i in range(d // 2)]


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_sinusoid_frequencies_are_correctly_rounded_for_random_bases_and_widths(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base, d = _base(rng), int(rng.integers(1, 1200))
    sinusoidal.frequencies.cache_clear()
    omega = [mpmath.power(base, -mpmath.mpf(2 * i) / d) for i in range((d + 1) // 2)]
    _assert_exact(sinusoidal.frequencies(d, base), omega)
    h = max(d // 2, 2)
    steps = max(h - 1, 1)
    omega = [mpmath.power(base, -mpmath.mpf(i) / steps) for i in range(h)]
    _assert_exact(sinusoidal.frequencies(2 * h, base, "fairseq"), omega)


def _yarn(params: RopeParams, omega: list[Any]) -> list[Any]:
    d, original, factor = params.d_model, params.original_max_position_embeddings, params.factor
    assert original is not None and factor is not None

    def correction_dim(rotations: float) -> float:  # float64, as transformers decides the ends
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(params.base))

    low, high = correction_dim(params.beta_fast or 32.0), correction_dim(params.beta_slow or 1.0)
    if params.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    result = []
    for i, w in enumerate(omega):
        ramp = min(max((i - mpmath.mpf(low)) / (mpmath.mpf(high) - low), 0), 1)
        result.append(w / factor * ramp + w * (1 - ramp))
    return result


def _llama3(params: RopeParams, omega: list[Any]) -> list[Any]:
    factor = mpmath.mpf(params.factor)
    low = mpmath.mpf(params.low_freq_factor or 1.0)
    high = mpmath.mpf(params.high_freq_factor or 4.0)
    original = mpmath.mpf(params.original_max_position_embeddings or 8192)
    result = []
    for w in omega:
        wavelength = 2 * mpmath.pi / w
        if wavelength < original / high:
            result.append(w)
        elif wavelength > original / low:
            result.append(w / factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            result.append((1 - smooth) * w / factor + smooth * w)
    return result


def _expected(params: RopeParams, seq_len: int) -> list[Any]:
    d = params.d_model
    if params.scaling == "dynamic" and d > 2:  # d = 2 has the one frequency 1, whatever the base
        factor = mpmath.mpf(params.factor)
        original = mpmath.mpf(params.original_max_position_embeddings)
        growth = factor * max(seq_len, original) / original - (factor - 1)
        base = params.base * mpmath.power(growth, mpmath.mpf(d) / (d - 2))
        return _omega(base, d)
    omega = _omega(mpmath.mpf(params.base), d)
    if params.freq_factors is not None:  # a GGUF's factor tensor divides first, as ggml does
        omega = [w / f for w, f in zip(omega, params.freq_factors, strict=True)]
    if params.scaling == "linear":
        return [w / params.factor for w in omega]
    if params.scaling == "yarn":
        return _yarn(params, omega)
    if params.scaling == "llama3":
        return _llama3(params, omega)
    if params.scaling == "longrope":
        assert params.original_max_position_embeddings is not None
        long = seq_len > params.original_max_position_embeddings
        ext = params.long_factor if long else params.short_factor
        return [w / e for w, e in zip(omega, ext, strict=True)]  # type: ignore[arg-type]
    return omega


def _random_params(scaling: str, rng: np.random.Generator) -> RopeParams:
    d = _width(rng)
    base = _base(rng)
    original = int(rng.integers(16, 65536))
    factor = float(rng.choice([0.5, 2.0, 4.0, 8.0, 32.0, float(rng.uniform(1, 64))]))
    extra: dict[str, Any] = {}
    if scaling == "none":
        return RopeParams(d_model=d, base=base)
    if scaling == "linear":
        extra = {"factor": factor}
    elif scaling in ("dynamic", "yarn"):
        extra = {"factor": factor, "original_max_position_embeddings": original}
        if scaling == "yarn":
            extra["truncate"] = bool(rng.integers(2))
            extra["beta_fast"] = float(rng.uniform(2, 64))
    elif scaling == "llama3":
        low = float(rng.uniform(0.5, 2))
        extra = {
            "factor": factor,
            "original_max_position_embeddings": original,
            "low_freq_factor": low,
            "high_freq_factor": low * float(rng.uniform(1.5, 8)),
        }
        # A base and context whose wavelengths fall on both sides of the smoothing band.
        base = float(rng.uniform(1e4, 1e6))
    else:
        extra = {
            "original_max_position_embeddings": original,
            "short_factor": tuple(float(x) for x in rng.uniform(0.5, 2, d // 2)),
            "long_factor": tuple(float(x) for x in rng.uniform(1, 64, d // 2)),
        }
    return RopeParams(d_model=d, base=base, scaling=scaling, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("scaling", ["none", "linear", "yarn"])
def test_rope_frequencies_with_a_gguf_s_factor_tensor_are_correctly_rounded(
    scaling: str, seed: int
) -> None:
    # recipe=exact with freq_factors: the exact rope llama.cpp's rope_freqs (or LongRoPE's
    # factors) approximates, each frequency divided by its factor and then scaled.
    rng = np.random.default_rng([seed, len(scaling), 7])
    params = _random_params(scaling, rng)
    factors = tuple(float(np.float32(x)) for x in rng.uniform(1, 64, params.d_model // 2))
    params = dataclasses.replace(params, freq_factors=factors)
    scaled.cache_clear()
    turns, _ = frequencies(params, 1)
    _assert_exact(turns, _expected(params, 1))


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("scaling", ["none", "linear", "dynamic", "yarn", "llama3", "longrope"])
def test_rope_frequencies_are_correctly_rounded_under_every_scaling(
    scaling: str, seed: int
) -> None:
    rng = np.random.default_rng([seed, len(scaling)])
    params = _random_params(scaling, rng)
    original = params.original_max_position_embeddings or 8192
    for seq_len in (1, original + int(rng.integers(1, 10**6))):
        scaled.cache_clear()
        turns, _ = frequencies(params, seq_len)
        _assert_exact(turns, _expected(params, seq_len))


def test_llama3_frequencies_cover_all_three_bands() -> None:
    params = RopeParams(
        d_model=128,
        base=500000.0,
        scaling="llama3",
        factor=8.0,
        original_max_position_embeddings=8192,
    )
    turns, _ = frequencies(params, 1)
    unscaled, _ = frequencies(RopeParams(d_model=128, base=500000.0), 1)
    ratio = unscaled.radians / turns.radians
    assert np.any(ratio == 1.0) and np.any(np.isclose(ratio, 8.0, rtol=1e-15))
    assert np.any((ratio > 1.0001) & (ratio < 7.999))
    _assert_exact(turns, _expected(params, 1))


def test_yarn_frequencies_cover_the_whole_ramp() -> None:
    params = RopeParams(
        d_model=128, scaling="yarn", factor=4.0, original_max_position_embeddings=2048
    )
    turns, attention = frequencies(params, 1)
    ratio = frequencies(RopeParams(d_model=128), 1)[0].radians / turns.radians
    assert np.any(ratio == 1.0) and np.any(np.isclose(ratio, 4.0, rtol=1e-15))
    assert np.any((ratio > 1.0001) & (ratio < 3.999))
    assert attention == pytest.approx(0.1 * math.log(4.0) + 1)
    _assert_exact(turns, _expected(params, 1))


@pytest.mark.parametrize("scaling", ["none", "linear", "yarn", "llama3"])
def test_a_new_offset_or_length_reuses_the_frequencies_of_a_scaling_that_ignores_it(
    scaling: str,
) -> None:
    params = _random_params(scaling, np.random.default_rng(7))
    first = frequencies(params, 10)
    assert frequencies(params, 10**6)[0] is first[0]
    rope.table(params, 3, 12345, "float32")
    assert frequencies(params, 12348)[0] is first[0]


def test_dynamic_and_longrope_frequencies_follow_the_length_past_the_trained_context() -> None:
    rng = np.random.default_rng(8)
    dynamic, longrope = _random_params("dynamic", rng), _random_params("longrope", rng)
    for params in (dynamic, longrope):
        original = params.original_max_position_embeddings
        assert original is not None
        within = frequencies(params, 1)[0]
        assert frequencies(params, original)[0] is within
        beyond = frequencies(params, original + 1)[0]
        assert not np.array_equal(beyond.hi, within.hi)
    original = dynamic.original_max_position_embeddings
    assert original is not None
    further = frequencies(dynamic, 2 * original)[0]
    assert np.all(further.hi[1:] < frequencies(dynamic, original + 1)[0].hi[1:])
    assert frequencies(longrope, 10**9)[0] is frequencies(longrope, original + 2)[0]


@pytest.mark.parametrize("scaling", ["linear", "longrope"])
def test_the_fastest_rope_served_is_correctly_rounded_near_2_31(scaling: str) -> None:
    """A divisor of 2^-16 (65536 radians per position): float32 cos and sin within half an ulp
    (+ 2^-14, the README's bound for tables) of mpmath at positions just below 2^31."""
    d, tiny = 4, SMALLEST_DIVISOR
    if scaling == "linear":
        params = RopeParams(d_model=d, scaling="linear", factor=tiny)
        divisors = [tiny, tiny]
    else:
        params = RopeParams(
            d_model=d,
            scaling="longrope",
            original_max_position_embeddings=8,
            short_factor=(1.0, 1.0),
            long_factor=(tiny, 3.0),
        )
        divisors = [tiny, 3.0]
    first = 2**31 - 6
    served = rope.table(params, 5, first, "float32", "cos_sin")
    with mpmath.workprec(250):
        for row, position in enumerate(range(first, first + 5)):
            for i, divisor in enumerate(divisors):
                omega = mpmath.power(10000, mpmath.mpf(-2 * i) / d) / mpmath.mpf(divisor)
                for plane, f in enumerate((mpmath.cos, mpmath.sin)):
                    exact = f(position * omega)
                    value = np.float32(served[plane, row, i])
                    ulp = float(np.spacing(np.abs(value)))
                    assert abs(float(value) - float(exact)) <= (0.5 + 2**-14) * ulp


def test_a_faster_rope_is_refused_naming_its_divisor() -> None:
    from posenc.errors import ParameterError

    with pytest.raises(ParameterError) as refused:
        RopeParams(d_model=4, scaling="linear", factor=SMALLEST_DIVISOR / 2)
    assert refused.value.param == "factor"


@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("scaling", ["none", "linear", "dynamic", "yarn", "llama3", "longrope"])
def test_pairs_past_rotary_pairs_have_frequency_zero_and_the_others_stay_exact(
    scaling: str, seed: int
) -> None:
    # proportional rope: the turning pairs keep the whole head's exponents 2i/d_model.
    rng = np.random.default_rng([seed, len(scaling), 1])
    whole = _random_params(scaling, rng)
    pairs = int(rng.integers(1, whole.d_model // 2 + 1))
    params = RopeParams(**{**whole.__dict__, "rotary_pairs": pairs})
    original = params.original_max_position_embeddings or 8192
    for seq_len in (1, original + int(rng.integers(1, 10**6))):
        scaled.cache_clear()
        turns, attention = frequencies(params, seq_len)
        expected, expected_attention = frequencies(whole, seq_len)
        assert attention == expected_attention
        for name in ("hi", "lo", "radians"):
            ours, theirs = getattr(turns, name), getattr(expected, name)
            assert np.array_equal(ours[:pairs], theirs[:pairs])
            assert not ours[pairs:].any()
        _assert_exact(expected, _expected(whole, seq_len))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("layout", ["split", "interleaved"])
@pytest.mark.parametrize("first", [0, 2**31 - 40])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_proportional_table_is_correctly_rounded_and_its_still_pairs_are_the_identity(
    dtype: str, first: int, layout: str, threads: int
) -> None:
    """Gemma 4's full-attention rope (a quarter of a 512-wide head turns, base 10^6, the
    exponents over the whole head): float32 within 0.5 + 2^-14 ulp of mpmath (the README's bound
    for tables), float64 within 1 ulp; the other pairs exactly cos 1 and sin +0."""
    d, pairs, n = 512, 64, 40
    params = RopeParams(d_model=d, base=1e6, layout=layout, rotary_pairs=pairs)  # type: ignore[arg-type]
    served = rope.table(params, n, first, dtype, "cos_sin", threads)
    assert np.array_equal(served, rope.table_reference(params, n, first, dtype, "cos_sin"))
    column = np.arange(d) % (d // 2) if layout == "split" else np.arange(d) // 2
    still = column >= pairs
    assert (served[0][:, still] == 1).all() and (served[1][:, still] == 0).all()
    assert not np.signbit(served[1][:, still]).any()
    bound = 0.5 + 2**-14 if dtype == "float32" else 1.0
    rng = np.random.default_rng(first + threads)
    with mpmath.workprec(250):
        for row, j in zip(
            rng.integers(0, n, 48), rng.choice(np.flatnonzero(~still), 48), strict=True
        ):
            omega = mpmath.power(mpmath.mpf(1e6), mpmath.mpf(-2 * int(column[j])) / d)
            for plane, f in enumerate((mpmath.cos, mpmath.sin)):
                value = served[plane, row, j]
                exact = f((first + int(row)) * omega)
                ulp = float(np.spacing(np.abs(value)))
                assert abs(float(value) - float(exact)) <= bound * ulp, (plane, row, j)


def test_rotary_pairs_beyond_the_head_are_refused_naming_it() -> None:
    from posenc.errors import ParameterError

    with pytest.raises(ParameterError) as refused:
        RopeParams(d_model=8, rotary_pairs=5)
    assert refused.value.param == "rotary_pairs"
    with pytest.raises(ParameterError) as refused:
        RopeParams(d_model=8, rotary_pairs=0)
    assert refused.value.param == "rotary_pairs"
