"""Frequencies in error-free float64 arithmetic, vectorised: no decimal work per frequency.

A frequency table ``ω_i = c · r^i`` (``r = base^(-step)``), scaled per element by the rope
scalings, is computed as *triple-doubles*: three float64 limbs ``x0 + x1 + x2`` per number,
kept by the error-free transformations of Knuth (``two_sum``) and Dekker (``two_prod``, with
Veltkamp's split, since NumPy has no fused multiply-add). A triple-double carries ~150 bits; a
frequency passes through at most a dozen operations, each within ~2^-150 relative, so rounding
the result to a double (the radians) or to a double-double ``hi + lo`` (the turns the exact
angle reduction multiplies, within 2^-106 relative where 2^-104 is needed) is the correct
rounding — as rounding the former 60-digit decimals was — unless the exact value lies within
~2^-145 of a rounding boundary.

Only scalars come from :mod:`decimal`, once per parameter set: ``c · r^k`` for ``k`` below the
radix, ``r^(k·R^j)`` for each further digit of ``i`` in radix ``R`` (:func:`geometric`), and the
scalings' constants. ``i`` has ``⌈log_R h⌉`` digits, so a frequency is ``⌈log_R h⌉ − 1``
products from its exact value, and the whole table is that many vectorised products.

>>> omega = geometric(Decimal(10000).ln(), Decimal(2) / 4, 2, [Decimal(1)])
>>> rounded(omega).tolist()
[[1.0, 0.01]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

Float64Array = npt.NDArray[np.float64]
# A triple-double: three limbs of one shape, the largest first, each about no larger than
# half an ulp of the one before it.
Triple = tuple[Float64Array, Float64Array, Float64Array]

_SPLITTER = float(2**27 + 1)
DIGITS = 60  # ~200 bits: the decimal scalars hold far more than the triple-doubles' 150


def two_sum(a: Float64Array, b: Float64Array) -> tuple[Float64Array, Float64Array]:
    """``s + e == a + b`` exactly, ``s`` the rounded sum (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a: Float64Array) -> tuple[Float64Array, Float64Array]:
    scaled = _SPLITTER * a
    high = scaled - (scaled - a)
    return high, a - high


def _product_error(
    p: Float64Array, a: tuple[Float64Array, Float64Array], b: tuple[Float64Array, Float64Array]
) -> Float64Array:
    """``a · b − p`` exactly, for ``p = fl(a · b)`` and both factors split (Dekker)."""
    return ((a[0] * b[0] - p) + a[0] * b[1] + a[1] * b[0]) + a[1] * b[1]


def _renormalise(x0: Float64Array, x1: Float64Array, x2: Float64Array) -> Triple:
    s, e = two_sum(x1, x2)
    r0, t = two_sum(x0, s)
    r1, r2 = two_sum(t, e)
    return r0, r1, r2


def triples(values: Sequence[Decimal]) -> Triple:
    """Decimals as triple-doubles, each limb the correctly rounded rest of the ones before.

    >>> x0, x1, x2 = triples([Decimal("0.1")])
    >>> from fractions import Fraction
    >>> error = sum(Fraction(x[0]) for x in (x0, x1, x2)) - Fraction(1, 10)
    >>> x0.tolist(), abs(error) < Fraction(1, 10) * 2**-150
    ([0.1], True)
    """
    return _limbs([_binary(value) for value in values])


# Scalars between decimal and float64: ``m · 2^e`` with ``m`` of ~_BITS bits. Python's integer
# products are exact and its int → float conversion is correctly rounded, so a power costs one
# product and a shift (~2^-190 relative), and three limbs cost three conversions: ~1 µs where
# the decimal way (float(), Decimal(float), a subtraction, three times) takes ~15 µs.
_BITS = 192
Binary = tuple[int, int]


def _binary(value: Decimal) -> Binary:
    shift = _BITS + 8 - int(value.adjusted() * 3.33)  # value · 2^shift has ~_BITS bits
    with localcontext(prec=3 * DIGITS):  # exact for a value of DIGITS digits
        scaled = value * Decimal(2**shift) if shift >= 0 else value / Decimal(2**-shift)
    return int(scaled), -shift


def _times(a: Binary, b: Binary) -> Binary:
    m, e = a[0] * b[0], a[1] + b[1]
    excess = m.bit_length() - _BITS
    return (m >> excess, e + excess) if excess > 0 else (m, e)


def _limbs(values: Sequence[Binary]) -> Triple:
    limbs = np.empty((3, len(values)))
    for i, (m, e) in enumerate(values):
        for k in range(3):
            limb = float(m)
            limbs[k, i] = math.ldexp(limb, e)
            m -= int(limb)
    return limbs[0], limbs[1], limbs[2]


def exact(values: Float64Array) -> Triple:
    """float64 values, exactly."""
    zero = np.zeros_like(values)
    return values, zero, zero


def take(a: Triple, where: int | npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> Triple:
    return a[0][where], a[1][where], a[2][where]


def multiply(a: Triple, b: Triple) -> Triple:
    """``a · b`` within ~2^-150 relative, broadcasting as NumPy does."""
    a0, a1 = _split(a[0]), _split(a[1])
    b0, b1 = _split(b[0]), _split(b[1])
    p00 = a[0] * b[0]
    p01 = a[0] * b[1]
    p10 = a[1] * b[0]
    rest = a[0] * b[2] + a[1] * b[1] + a[2] * b[0]
    rest += _product_error(p01, a0, b1) + _product_error(p10, a1, b0)
    s1, t1 = two_sum(p01, p10)
    s1, t2 = two_sum(s1, _product_error(p00, a0, b0))
    return _renormalise(p00, s1, rest + (t1 + t2))


def add(a: Triple, b: Triple) -> Triple:
    """``a + b`` within ~2^-150 of the larger operand (a cancellation costs only what it must)."""
    s0, t0 = two_sum(a[0], b[0])
    s1, t1 = two_sum(a[1], b[1])
    s1, t2 = two_sum(s1, t0)
    return _renormalise(s0, s1, a[2] + b[2] + (t1 + t2))


def divide(a: Triple, b: Float64Array) -> Triple:
    """``a / b`` for float64 divisors, by long division: three quotient digits, each remainder
    formed exactly (``a0 − q·b`` is exact by Sterbenz's lemma, ``q·b`` by Dekker)."""
    b_split = _split(b)
    q0 = a[0] / b
    p = q0 * b
    # The rounding error of q·b is as large as a's second limb: add it by two_sum too.
    r0, r1 = two_sum(a[0] - p, a[1])
    r0, t = two_sum(r0, -_product_error(p, _split(q0), b_split))
    r0, r1 = two_sum(r0, r1 + t + a[2])
    q1 = r0 / b
    p = q1 * b
    s0, t = two_sum(r0 - p, -_product_error(p, _split(q1), b_split))
    q2 = (s0 + (r1 + t)) / b
    return _renormalise(q0, q1, q2)


def greater(a: Triple, b: Triple) -> npt.NDArray[np.bool_]:
    """``a > b``, decided on the difference (its leading limb carries its sign)."""
    difference = add(a, (-b[0], -b[1], -b[2]))
    return difference[0] > 0


def rounded(a: Triple) -> Float64Array:
    """The nearest float64 to ``a``."""
    return double_double(a)[0]


def double_double(a: Triple) -> tuple[Float64Array, Float64Array]:
    """``hi`` the nearest float64 to ``a`` and ``lo`` the nearest float64 to ``a − hi``."""
    s, e = two_sum(a[1], a[2])
    hi, t = two_sum(a[0], s)
    return hi, t + e


def geometric(
    log_base: Decimal, exponent: Decimal, count: int, scales: Sequence[Decimal]
) -> Triple:
    """``scale · base^(-exponent · i)`` for each scale (rows) and ``i < count`` (columns):
    ``i = R·a + k`` with ``R = ⌈√count⌉``, the scalars ``scale · r^k`` and ``r^(R·a)`` exact to
    ~2^-185, then one vectorised product. ``exponent`` must hold DIGITS digits (a ratio
    divided at the default 28 would cost ~2^-93 relative at the widest table)."""
    with localcontext(prec=DIGITS):
        ratio = _binary((-exponent * log_base).exp())
    radix = math.isqrt(count - 1) + 1 if count > 1 else 1
    first: list[Binary] = []
    for scale in scales:
        power = _binary(scale)
        for _ in range(radix):
            first.append(power)
            power = _times(power, ratio)
    stride = power = _binary(Decimal(1))
    for _ in range(radix):
        stride = _times(stride, ratio)
    column = []
    for _ in range(-(-count // radix)):
        column.append(power)
        power = _times(power, stride)
    rows = len(scales)
    low = tuple(limb.reshape(rows, 1, radix) for limb in _limbs(first))
    high = tuple(limb.reshape(1, -1, 1) for limb in _limbs(column))
    product = multiply(low, high)  # type: ignore[arg-type]
    return tuple(limb.reshape(rows, -1)[:, :count] for limb in product)  # type: ignore[return-value]
