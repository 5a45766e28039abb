"""The exact product and reduction behind every value."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from posenc.errors import ParameterError
from posenc.exact import MAX_POSITION, geometric_turns, sincos
from posenc.sinusoidal import SinusoidalParams, encode, frequencies


def test_frequency_in_turns_carries_106_bits() -> None:
    turns = geometric_turns(10000.0, Decimal(2) / 512, 256)
    held = Fraction(turns.hi[100]) + Fraction(turns.lo[100])
    mpmath.mp.prec = 200
    truth = mpmath.power(10000, -mpmath.mpf(200) / 512) / (2 * mpmath.pi)
    assert abs(mpmath.mpf(held.numerator) / held.denominator / truth - 1) < 2.0**-104


def test_angles_of_whole_turns_give_zero_sine_exactly() -> None:
    # ω = 2π·(1/4) per position: a frequency whose angle is a whole number of quarter turns.
    turns = geometric_turns(2.0, Decimal(0), 1)
    s, c = sincos(np.array([0, 1, 2, 3]), turns)
    assert s.shape == c.shape == (4, 1)
    np.testing.assert_allclose(s[:, 0], np.sin([0.0, 1.0, 2.0, 3.0]), rtol=1e-15)


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
