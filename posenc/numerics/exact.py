"""Sines and cosines of ``position × frequency`` that stay exact at every position below 2^31.

The usual recipe forms the angle ``pos * omega`` in floating point and hands it to ``sin``. At
position 10^6 a float32 angle is already off by ~0.03 rad, and even a float64 angle loses
``log2(pos)`` of its 53 bits, so the sine of a large angle is only as good as the angle's last
bits. Here the frequency is held in turns per position (``nu = omega / 2π``) as a double-double
``hi + lo`` carrying ~106 bits, and the product ``pos · nu`` is formed exactly (Dekker's product)
so that its integer part, a whole number of turns, can be dropped without losing anything. What
is left is a fraction of a turn accurate to ~2^-76 absolute, which is folded into a quarter turn
around the nearest multiple of π/2, where sine and cosine are well conditioned.

Error budget for an integer position ``p < 2^31`` (|angle| up to ~2^31 rad):
- ``nu`` to 2^-106 relative (the nearest double-double, :mod:`posenc.numerics.doubledouble`) → 2^-78
turns;
- ``p · nu_lo`` rounded once → 2^-78 turns;
- the reduced angle ``a`` (|a| ≤ π/4) as a double-double → its own rounding error ~2^-104·|a|;
- ``sin``/``cos`` of the leading double from NumPy (≤ 1 ulp), corrected to first order by the
  trailing one.
So each result is within ~1 float64 ulp of the exact value relative to the value itself, and a
single rounding to float32 or float16 gives the correctly rounded result unless the exact value
lies within ~2^-29 of a float32 ulp from a rounding boundary; it is never off by more than
0.5 + 2^-20 ulp.
"""

from __future__ import annotations

import mmap
import sys
from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc import pages
from posenc.cancel import checkpoint
from posenc.errors import ParameterError
from posenc.numerics import doubledouble

Float64Array = npt.NDArray[np.float64]

# Digits of the decimal scalars behind the frequencies (π, logarithms): far more than the ~150
# bits of the triple-doubles they start.
_DIGITS = doubledouble.DIGITS
# Veltkamp's constant splits a double into two halves of at most 26 significant bits.
_SPLITTER = float(2**27 + 1)
# Position 2^31 is excluded by the API; below it positions are exact integers in float64 and
# split into 16-bit halves, so every partial product in Dekker's product is exact.
MAX_POSITION = 2**31 - 1


def consecutive_positions(seq_len: int, offset: int) -> npt.NDArray[np.int64]:
    """Positions ``offset … offset+seq_len-1``, all below 2^31, or the parameter named."""
    if seq_len < 1:
        raise ParameterError("seq_len", f"must be ≥ 1, got {seq_len}")
    if not 0 <= offset <= MAX_POSITION:
        raise ParameterError("offset", f"must be in [0, 2^31), got {offset}")
    if offset + seq_len - 1 > MAX_POSITION:
        raise ParameterError(
            "seq_len",
            f"offset + seq_len must be ≤ 2^31 (positions below 2^31), got {offset + seq_len}",
        )
    return np.arange(offset, offset + seq_len, dtype=np.int64)


# NumPy asks the kernel for transparent huge pages for every array from 4 MiB up, and a table
# is always fresh memory (the cache keeps the ones before it). On the 2-core VM of the benchmarks
# a huge page comes from memory the hypervisor has not backed yet more often than a small page
# (no compaction stalled: /proc/vmstat), and a fresh 32 MiB took 10-130 ms, 64 MiB up to 210 ms;
# in 4 KiB pages faulted in by one madvise call (MADV_POPULATE_WRITE, Linux 5.14) 8-16 ms and
# 17-30 ms in most runs (tables of 8192×1024 kept as the cache keeps them: median 132 → 29 ms).
# Where huge pages are cheap (a host with them backed) this costs a few ms per 64 MiB.
_HUGE_PAGE_ADVISED = 4 * 2**20
_MADV_NOHUGEPAGE = 15
_MADV_POPULATE_WRITE = 23
_POPULATED_AT_ONCE = 64 * 2**10  # below this, a few faults cost less than the call


def fresh_output(
    shape: tuple[int, ...], dtype: str, populate: bool = True
) -> tuple[npt.NDArray[Any], bool]:
    """``np.empty(shape, dtype)`` in small pages, and whether its pages are in place already.

    A table of the context's spares (:mod:`posenc.pages`) is written into a gone table's pages,
    in place. Otherwise they are new: put in place at once if ``populate`` (Linux; elsewhere,
    or where the kernel refuses the advice, exactly ``np.empty``), else they come as the loops
    reach them — a call's rows at once (:func:`fault_in`) in the rotation loops, a page at a
    time in the exact ones — so rows sent while later ones are computed leave without waiting
    for the whole table's pages."""
    out, recycled = pages.empty(shape, dtype)
    if recycled:
        return out, True
    if out.nbytes >= _HUGE_PAGE_ADVISED and sys.platform == "linux":
        if _advise(out, _MADV_NOHUGEPAGE) and populate:
            return out, _advise(out, _MADV_POPULATE_WRITE)
    return out, False


def fault_in(part: npt.NDArray[Any]) -> None:
    """Fault in the whole pages of a contiguous part of a :func:`fresh_output` in one call, as
    the loops are about to write it: cheaper than a fault per 4 KiB page."""
    if part.nbytes >= _POPULATED_AT_ONCE and sys.platform == "linux":
        _advise(part, _MADV_POPULATE_WRITE)


def _advise(part: npt.NDArray[Any], advice: int) -> bool:
    page = mmap.PAGESIZE
    start = -(-part.ctypes.data // page) * page
    length = (part.ctypes.data + part.nbytes) // page * page - start
    return length <= 0 or _madvise()(start, length, advice) == 0


@lru_cache(maxsize=1)
def _madvise() -> Any:
    import ctypes  # only once a table this large is asked for: it costs the import of posenc

    function = ctypes.CDLL(None, use_errno=True).madvise
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function


@lru_cache(maxsize=1)
def decimal_pi() -> Decimal:
    """π to :data:`_DIGITS` digits by the series in the :mod:`decimal` documentation."""
    with localcontext(prec=_DIGITS + 5):
        three = Decimal(3)
        lasts, t, s, n, na, d, da = Decimal(0), three, three, 1, 0, 0, 24
        while s != lasts:
            lasts = s
            n, na = n + na, na + 8
            d, da = d + da, da + 32
            t = (t * n) / d
            s += t
        return +s


@lru_cache(maxsize=1)
def _per_turn() -> Decimal:
    with localcontext(prec=_DIGITS):
        return 1 / (2 * decimal_pi())


@dataclass(frozen=True, eq=False)
class Turns:
    """Frequencies in turns per position as double-doubles, ready for exact products.

    ``hi + lo`` is the frequency; ``hi_a + hi_b == hi`` is its Veltkamp split.
    ``radians`` is the float64 frequency in radians per position, for reporting.
    """

    hi: Float64Array
    lo: Float64Array
    hi_a: Float64Array
    hi_b: Float64Array
    radians: Float64Array

    @classmethod
    def from_rows(cls, rows: doubledouble.Triple) -> Turns:
        """From the frequencies in radians (row 0) and in turns (row 1) as triple-doubles:
        ``hi`` and ``lo`` are the nearest doubles to the turns and to their rest, ``radians``
        the nearest double to the radians."""
        hi, lo = doubledouble.double_double(doubledouble.take(rows, 1))
        hi_a, hi_b = _split(hi)
        arrays = (hi, lo, hi_a, hi_b, doubledouble.rounded(doubledouble.take(rows, 0)))
        for array in arrays:
            array.flags.writeable = False
        return cls(*arrays)

    def __len__(self) -> int:
        return len(self.hi)


def geometric_turns(base: float, exponent_step: Decimal, count: int) -> Turns:
    """Frequencies ``base ** (-exponent_step · i)`` for ``i = 0 … count-1``, in turns.

    ``exponent_step`` must hold 60 digits (a ratio divided at decimal's default 28 digits
    costs ~2^-93 relative at the widest table, where 2^-104 is needed).

    >>> t = geometric_turns(10000.0, Decimal(2) / 4, 2)
    >>> t.radians.tolist()
    [1.0, 0.01]
    """
    checkpoint()
    with localcontext(prec=_DIGITS):
        log_base = Decimal(base).ln()
    return Turns.from_rows(radians_and_turns(log_base, exponent_step, count))


def radians_and_turns(
    log_base: Decimal, exponent_step: Decimal, count: int, scale: Decimal = Decimal(1)
) -> doubledouble.Triple:
    """``scale · base^(-exponent_step · i)`` in radians (row 0) and in turns per position
    (row 1), as triple-doubles ``(2, count)`` (:func:`posenc.numerics.doubledouble.geometric`)."""
    with localcontext(prec=_DIGITS):
        scales = [scale, scale * _per_turn()]
    return doubledouble.geometric(log_base, exponent_step, count, scales)


def _split(x: Float64Array) -> tuple[Float64Array, Float64Array]:
    scaled = _SPLITTER * x
    high = scaled - (scaled - x)
    return high, x - high


def _two_sum(a: Float64Array, b: Float64Array) -> tuple[Float64Array, Float64Array]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


_TWO_PI_HI = 2 * np.pi
_TWO_PI_LO = 2.4492935982947064e-16  # 2π − fl(2π), i.e. 2·(π − fl(π))
_TWO_PI_A, _TWO_PI_B = (float(v) for v in _split(np.array(_TWO_PI_HI)))


def sincos(positions: npt.NDArray[np.int64], turns: Turns) -> tuple[Float64Array, Float64Array]:
    """``sin`` and ``cos`` of ``2π · p · nu`` for every position ``p`` and frequency ``nu``.

    Shapes: ``positions (n,)``, ``turns (h,)`` → two float64 arrays ``(n, h)``.

    >>> s, c = sincos(np.array([0, 1, 10**9]), geometric_turns(10000.0, Decimal(2) / 2, 1))
    >>> s[:, 0].tolist() == [0.0, float(np.sin(1.0)), 0.5458434494486996]
    True
    """
    p = np.asarray(positions, dtype=np.float64)[:, None]
    return _sincos(p, turns.hi, turns.lo, turns.hi_a, turns.hi_b)


def sincos_pairs(
    positions: npt.NDArray[np.int64], columns: npt.NDArray[np.intp], turns: Turns
) -> tuple[Float64Array, Float64Array]:
    """``sin`` and ``cos`` of ``2π · positions[k] · nu[columns[k]]`` elementwise: ``(k,)``."""
    p = np.asarray(positions, dtype=np.float64)
    return _sincos(
        p, turns.hi[columns], turns.lo[columns], turns.hi_a[columns], turns.hi_b[columns]
    )


def _sincos(
    p: Float64Array, hi: Float64Array, lo: Float64Array, hi_a: Float64Array, hi_b: Float64Array
) -> tuple[Float64Array, Float64Array]:
    p_a = np.floor(p * 2.0**-16) * 2.0**16
    p_b = p - p_a
    # Dekker's exact product p · hi = whole + tail; every partial product below is exact.
    whole = p * hi
    tail = ((p_a * hi_a - whole) + p_a * hi_b + p_b * hi_a) + p_b * hi_b
    tail += p * lo
    # Drop whole turns, then fold to the nearest quarter turn; both subtractions are exact.
    fraction = whole - np.rint(whole)
    quarter = np.rint(4.0 * fraction)
    fraction -= 0.25 * quarter
    r_hi, r_lo = _two_sum(fraction, tail)
    # The reduced angle a = 2π · r as a double-double (|a| ≤ π/4 + tiny).
    a_hi = r_hi * _TWO_PI_HI
    r_a, r_b = _split(r_hi)
    a_lo = ((r_a * _TWO_PI_A - a_hi) + r_a * _TWO_PI_B + r_b * _TWO_PI_A) + r_b * _TWO_PI_B
    a_lo += r_hi * _TWO_PI_LO + r_lo * _TWO_PI_HI
    sin_a, cos_a = np.sin(a_hi), np.cos(a_hi)
    sin_a, cos_a = sin_a + cos_a * a_lo, cos_a - sin_a * a_lo
    return _rotate_by_quarters(sin_a, cos_a, quarter)


def _rotate_by_quarters(
    sin_a: Float64Array, cos_a: Float64Array, quarter: Float64Array
) -> tuple[Float64Array, Float64Array]:
    # sin(a + qπ/2) and cos(a + qπ/2) for q mod 4 = 0, 1, 2, 3.
    q = np.mod(quarter, 4.0)
    odd = np.mod(q, 2.0) == 1.0
    sin_sign = np.where(q >= 2.0, -1.0, 1.0)
    cos_sign = np.where((q == 1.0) | (q == 2.0), -1.0, 1.0)
    sin_out = np.where(odd, cos_a, sin_a)
    cos_out = np.where(odd, sin_a, cos_a)
    sin_out *= sin_sign
    cos_out *= cos_sign
    return sin_out, cos_out
