"""The compiled loops of :mod:`.measure`: passes over a block of samples, every sample of every
pair read once a pass — its products summed, then its angle and length ratio held to the
resolution of its own values.

A pair ``(x₁, x₂) → (y₁, y₂)`` of one sample turns by ``θ = atan2(x₁y₂ − x₂y₁, x₁y₁ + x₂y₂)``
and scales by ``ρ = |y| / |x|``. Each is known to within what the dtypes leave of it:
``α = ulp_after(|y|)/|y| + ulp_before(|x|)/|x| + floor`` radians (``floor``: the kernel's own
arithmetic and the rounding of its cos/sin, two epsilons of the coarser dtype) and
``ρ·α`` (``ulp_after(|y|)/|x|`` when ``y`` is 0). The samples of a cell (one token, one pair)
are vectors turned by one rotation, so the cell keeps the intersection of their intervals: the
rotations every sample allows.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

# Per cell, in this order (the rows of ``out``): the sums Σ x·y (dot), Σ x×y (cross), Σ|x|²,
# Σ|y|²; the angle interval [LOW, HIGH] and the spread [SMALLEST, LARGEST] of the samples'
# angles, each relative to the cell's mean angle atan2(Σ cross, Σ dot); the ratio interval
# [RATIO_LOW, RATIO_HIGH]; the sharpest sample's angle resolution; the samples read.
DOT, CROSS, XX, YY, LOW, HIGH, SMALLEST, LARGEST, RATIO_LOW, RATIO_HIGH, SHARPEST, READ = range(12)
STATS = 12
# Below this |tan|, atan's series to the fifth power is exact to float64's rounding.
_SERIES = 1e-2


@numba.njit(cache=True, nogil=True, inline="always")
def _ulp(value: float, bits: int, emin: int, word: npt.NDArray[np.float64]) -> float:
    """The spacing of a dtype with ``bits`` of precision at ``value`` ≥ 0 (its subnormals'
    below ``2^emin``), read off the double's exponent field (``word``: a one-double scratch,
    so that no call allocates)."""
    word[0] = value
    exponent = ((word.view(np.int64)[0] >> 52) & 0x7FF) - 1023
    step = max(exponent, emin) - bits + 1
    if step < -1022:
        return math.ldexp(1.0, step)
    word.view(np.int64)[0] = np.int64(step + 1023) << 52
    return float(word[0])


@numba.njit(cache=True, nogil=True, inline="always")
def _atan(v: float, u: float) -> float:
    """atan2(v, u), by its series where the angle is small (most samples sit within a
    resolution of their cell's mean): a quarter of atan2's time."""
    if u > 0.0 and abs(v) < _SERIES * u:
        r = v / u
        r2 = r * r
        return r * (1.0 - r2 * (1.0 / 3.0 - r2 * 0.2))
    return math.atan2(v, u)


# Each statistic before any sample is read: the sums 0, the intervals the whole line, the spread
# and the sharpest resolution empty.
INITIAL = np.array([0.0, 0.0, 0.0, 0.0, -math.inf, math.inf, math.inf, -math.inf, -math.inf,
                    math.inf, math.inf, 0.0])  # fmt: skip


@numba.njit(cache=True, nogil=True)
def sums(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    pairs: npt.NDArray[np.int64],
    out: npt.NDArray[np.float64],
) -> None:
    """Add a block's samples to the sums of every cell (rows DOT … YY of ``out``): ``x``,
    ``y`` ``(tokens, samples, head)``; pair ``i`` is columns ``pairs[0, i]``, ``pairs[1, i]``
    of ``x`` turned into columns ``pairs[2, i]``, ``pairs[3, i]`` of ``y``; ``out``
    ``(STATS, tokens, pairs)``. A token's samples may come in several blocks, in order."""
    tokens, samples, _ = x.shape
    for t in range(tokens):
        for i in range(pairs.shape[1]):
            a, b, c, e = pairs[0, i], pairs[1, i], pairs[2, i], pairs[3, i]
            dot, cross, xx, yy = out[DOT, t, i], out[CROSS, t, i], out[XX, t, i], out[YY, t, i]
            for s in range(samples):
                x1, x2, y1, y2 = x[t, s, a], x[t, s, b], y[t, s, c], y[t, s, e]
                dot += x1 * y1 + x2 * y2
                cross += x1 * y2 - x2 * y1
                xx += x1 * x1 + x2 * x2
                yy += y1 * y1 + y2 * y2
            out[DOT, t, i], out[CROSS, t, i], out[XX, t, i], out[YY, t, i] = dot, cross, xx, yy


@numba.njit(cache=True, nogil=True)
def spreads(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    pairs: npt.NDArray[np.int64],
    before: tuple[int, int],
    after: tuple[int, int],
    floor: float,
    out: npt.NDArray[np.float64],
) -> None:
    """Narrow every cell's intervals (rows LOW … READ of ``out``) by a block's samples, each
    angle relative to the cell's mean ``atan2(Σ cross, Σ dot)``: the sums of all its samples
    (:func:`sums`) come first. Arguments as for :func:`sums`."""
    tokens, samples, _ = x.shape
    word = np.zeros(1, np.float64)
    for t in range(tokens):
        for i in range(pairs.shape[1]):
            a, b, c, e = pairs[0, i], pairs[1, i], pairs[2, i], pairs[3, i]
            dot, cross = out[DOT, t, i], out[CROSS, t, i]
            norm = math.hypot(dot, cross)
            cos_mean, sin_mean = (dot / norm, cross / norm) if norm > 0 else (1.0, 0.0)
            low, high = out[LOW, t, i], out[HIGH, t, i]
            smallest, largest = out[SMALLEST, t, i], out[LARGEST, t, i]
            ratio_low, ratio_high = out[RATIO_LOW, t, i], out[RATIO_HIGH, t, i]
            sharpest, read = out[SHARPEST, t, i], out[READ, t, i]
            for s in range(samples):
                x1, x2, y1, y2 = x[t, s, a], x[t, s, b], y[t, s, c], y[t, s, e]
                nx = math.sqrt(x1 * x1 + x2 * x2)
                if nx == 0.0:
                    continue
                ny = math.sqrt(y1 * y1 + y2 * y2)
                relative = _ulp(nx, before[0], before[1], word) / nx + floor
                rounding = _ulp(ny, after[0], after[1], word)
                ratio = ny / nx
                spread = (rounding + ny * relative) / nx
                ratio_low = max(ratio_low, ratio - spread)
                ratio_high = min(ratio_high, ratio + spread)
                read += 1.0
                if ny == 0.0:
                    continue
                alpha = rounding / ny + relative
                if alpha >= math.pi:
                    continue
                along, across = x1 * y1 + x2 * y2, x1 * y2 - x2 * y1
                deviation = _atan(
                    across * cos_mean - along * sin_mean, along * cos_mean + across * sin_mean
                )
                low = max(low, deviation - alpha)
                high = min(high, deviation + alpha)
                smallest = min(smallest, deviation)
                largest = max(largest, deviation)
                sharpest = min(sharpest, alpha)
            out[LOW, t, i], out[HIGH, t, i] = low, high
            out[SMALLEST, t, i], out[LARGEST, t, i] = smallest, largest
            out[RATIO_LOW, t, i], out[RATIO_HIGH, t, i] = ratio_low, ratio_high
            out[SHARPEST, t, i], out[READ, t, i] = sharpest, read


@numba.njit(cache=True, nogil=True)
def still(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    columns: npt.NDArray[np.int64],
    before: tuple[int, int],
    after: tuple[int, int],
    moved: npt.NDArray[np.float64],
) -> None:
    """``moved[k]``: the largest change of column ``columns[k]`` in units of what rounding
    allows it (``ulp_after + ulp_before`` at the value): ≤ 1 where it came out unchanged."""
    tokens, samples, _ = x.shape
    word = np.zeros(1, np.float64)
    for t in range(tokens):
        for s in range(samples):
            for k in range(len(columns)):
                given = x[t, s, columns[k]]
                size = abs(given)
                allowed = _ulp(size, after[0], after[1], word) + _ulp(
                    size, before[0], before[1], word
                )
                moved[k] = max(moved[k], abs(y[t, s, columns[k]] - given) / allowed)


def compile_loops() -> None:
    """Run each loop once with the types a request meets (``out`` the cells of a block of
    tokens: all of them, contiguous, or a view of some), so numba compiles them up front."""
    x = np.ones((1, 1, 2), np.float64)
    pairs = np.array([[0], [1], [0], [1]], np.int64)
    cells = np.empty((STATS, 2, 1))
    for out in (cells, cells[:, :1]):
        sums(x, x, pairs, out)
        spreads(x, x, pairs, (24, -126), (24, -126), 2.0**-23, out)
    still(x, x, pairs[0], (24, -126), (24, -126), np.zeros(1))
