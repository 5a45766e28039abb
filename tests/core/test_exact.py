"""The exact product and reduction behind every value."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from posenc.errors import ParameterError
from posenc.numerics.exact import MAX_POSITION, Turns, geometric_turns, sincos
from posenc.schemes.sinusoidal.maths import encode, frequencies
from posenc.schemes.sinusoidal.params import SinusoidalParams


def test_frequency_in_turns_carries_106_bits() -> None:
    turns = geometric_turns(10000.0, Decimal(2) / 512, 256)
    held = Fraction(turns.hi[100]) + Fraction(turns.lo[100])
    mpmath.mp.prec = 200
    truth = mpmath.power(10000, -mpmath.mpf(200) / 512) / (2 * mpmath.pi)
    assert abs(mpmath.mpf(held.numerator) / held.denominator / truth - 1) < 2.0**-104


def test_angles_of_whole_turns_give_zero_sine_exactly() -> None:
    # ν = 1/4 turn per position, held exactly (hi = 0.25, lo = 0): every fourth position is a
    # whole number of turns, every other one half a turn. The naive float64 angle p·π/2 is off
    # by up to ~2^-22 rad at p ~ 2^31 and gives sines of that size; the exact reduction gives 0.
    quarter = np.array([0.25])
    turns = Turns(quarter, np.zeros(1), quarter, np.zeros(1), quarter * 2 * np.pi)
    whole = np.array([0, 4, 8, 2**31 - 4], dtype=np.int64)
    half = whole + 2
    half[-1] = 2**31 - 2
    s_whole, c_whole = sincos(whole, turns)
    s_half, c_half = sincos(half, turns)
    assert s_whole.ravel().tolist() == [0.0] * 4 and c_whole.ravel().tolist() == [1.0] * 4
    assert np.all(s_half == 0.0) and c_half.ravel().tolist() == [-1.0] * 4
    assert abs(np.sin((2**31 - 4) * (np.pi / 2))) > 1e-8  # what the naive angle gives


def test_positions_outside_the_range_are_refused_with_their_value() -> None:
    with pytest.raises(ParameterError, match="2147483648"):
        encode(SinusoidalParams(d_model=4), np.array([0, MAX_POSITION + 1]))
    with pytest.raises(ParameterError, match="-1"):
        encode(SinusoidalParams(d_model=4), np.array([-1]))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"d_model": 0}, "d_model"),
        ({"d_model": 65537}, "d_model"),
        ({"d_model": 2, "base": 1.0}, "base"),
        ({"d_model": 2, "base": float("nan")}, "base"),
        ({"d_model": 2, "layout": "x"}, "layout"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ParameterError) as raised:
        SinusoidalParams(**kwargs)  # type: ignore[arg-type]
    assert raised.value.param == named


def test_frequency_vectors_are_cached_and_read_only() -> None:
    first = frequencies(64, 10000.0)
    assert frequencies(64, 10000.0) is first
    with pytest.raises(ValueError, match="read-only"):
        first.hi[0] = 0.0
