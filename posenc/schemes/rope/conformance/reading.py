"""What the cache says about itself, read in one pass: the frequencies ``ω̂_i`` and how far
each can be trusted, the amplitude of cos and sin, and the first row's phases."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from posenc.schemes.rope.conformance.rows import Float64Array, FloatArray, Model
from posenc.verify import row_chunks


@dataclass(frozen=True)
class Reading:
    """What the cache says about itself, in the frame (layout, swap) it was found to use."""

    omega: Float64Array  # ω̂_i, NaN where unreadable
    relative_noise: Float64Array  # how far each ln ω̂_i can be trusted
    amplitude: float | None
    first_phases: list[Float64Array]  # the first row's angle mod 2π, each possible reading


def _halves(
    frame: Model, array: FloatArray, component: str, rows: slice
) -> tuple[Float64Array, Float64Array | None]:
    """One value of each pair, ``(r, d/2)`` in float64: (cos, sin), (cos|sin, None) or (angle,
    None), in the frame's layout and swap."""
    d = frame.params.d_model
    pick = slice(0, d // 2) if frame.params.layout == "split" else slice(0, d, 2)
    if component == "angle":
        return array[rows].astype(np.float64), None
    if component == "cos_sin":
        first = array[0, rows][:, pick].astype(np.float64)
        second = array[1, rows][:, pick].astype(np.float64)
        return (second, first) if frame.swapped else (first, second)
    return array[rows][:, pick].astype(np.float64), None


def read(frame: Model, array: FloatArray, component: str, n: int) -> Reading:
    """ω̂_i, the amplitude and the first row's phases, in one pass: O(n·d).

    - cos and sin: ``ω̂ = Σ_p arg(z_{p+1}·z̄_p) / (n−1)`` with ``z = cos + i·sin`` (a sum that
      telescopes to the phase turned end to end), noise from the spread of the steps;
      amplitude the mean of ``|z|``;
    - cos or sin alone: ``x_{p+1} + x_{p−1} = 2·cos ω · x_p`` for any phase and amplitude, so
      ``cos ω̂ = Σ x_p (x_{p+1} + x_{p−1}) / 2Σ x_p²`` (least squares, noise from its
      residuals), and ``A² = x_p² + ((x_{p+1} − x_{p−1}) / 2 sin ω)²`` at the best-conditioned
      pair;
    - angles: ``ω̂ = (θ_last − θ_first) / (n − 1)``, noise the dtype's rounding of the angles.
    """
    h = frame.params.d_model // 2
    eps = float(np.finfo(array.dtype).eps)
    first, second = _halves(frame, array, component, slice(0, 1))
    nan = np.full(h, np.nan)
    if component == "angle":
        last, _ = _halves(frame, array, component, slice(n - 1, n))
        if n < 2:
            return Reading(nan, nan, None, [first[0]])
        omega = (last[0] - first[0]) / (n - 1)
        largest = np.maximum(np.abs(last[0]), np.abs(first[0]))
        noise = 2 * eps * largest / (n - 1) / np.maximum(np.abs(omega), 1e-300)
        return Reading(omega, noise, None, [first[0]])
    if component == "cos_sin":
        return _read_pairs(frame, array, component, n, first, second, eps)
    return _read_single(frame, array, component, n, first, eps)


def _read_pairs(
    frame: Model,
    array: FloatArray,
    component: str,
    n: int,
    first: Float64Array,
    second: Float64Array | None,
    eps: float,
) -> Reading:
    assert second is not None
    h = frame.params.d_model // 2
    turned, squares, amplitude = np.zeros(h), np.zeros(h), 0.0
    for rows in row_chunks(n, 2 * frame.params.d_model):
        c, s = _halves(frame, array, component, slice(rows.start, min(rows.stop + 1, n)))
        assert s is not None
        amplitude += float(
            np.sqrt(c[: rows.stop - rows.start] ** 2 + s[: rows.stop - rows.start] ** 2).sum()
        )
        steps = np.arctan2(s[1:] * c[:-1] - c[1:] * s[:-1], c[1:] * c[:-1] + s[1:] * s[:-1])
        turned += steps.sum(axis=0)
        squares += (steps**2).sum(axis=0)
    phases = [np.arctan2(second[0], first[0])]
    mean_amplitude = amplitude / (n * h)
    if n < 2:
        return Reading(np.full(h, np.nan), np.full(h, np.nan), mean_amplitude, phases)
    omega = turned / (n - 1)
    spread = np.sqrt(np.maximum(squares / (n - 1) - omega**2, 0.0))
    noise = 3 * np.maximum(spread, eps) / (n - 1) / np.maximum(np.abs(omega), 1e-300)
    return Reading(omega, noise, mean_amplitude, phases)


def _read_single(
    frame: Model, array: FloatArray, component: str, n: int, first: Float64Array, eps: float
) -> Reading:
    h = frame.params.d_model // 2
    sxx, sxy, syy, sdd = np.zeros(h), np.zeros(h), np.zeros(h), np.zeros(h)
    centres = 0
    for rows in row_chunks(n, frame.params.d_model):
        block = slice(max(rows.start - 1, 0), min(rows.stop + 1, n))
        x, _ = _halves(frame, array, component, block)
        centre, around, difference = x[1:-1], x[2:] + x[:-2], x[2:] - x[:-2]
        sxx += (centre**2).sum(axis=0)
        sxy += (centre * around).sum(axis=0)
        syy += (around**2).sum(axis=0)
        sdd += (difference**2).sum(axis=0)
        centres += len(centre)
    nan = np.full(h, np.nan)
    if centres == 0:
        return Reading(nan, nan, None, [])
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.clip(sxy / (2 * sxx), -1.0, 1.0)
        residual = np.maximum(syy - sxy**2 / sxx, 0.0)
        cosine_noise = np.maximum(
            0.5 * np.sqrt(residual / (centres * sxx)), eps / math.sqrt(centres)
        )
    omega = np.arccos(cosine)
    sine = np.sin(omega)
    with np.errstate(divide="ignore", invalid="ignore"):
        noise = 3 * cosine_noise / sine / omega
    noise = np.where(np.isfinite(noise), noise, np.inf)
    amplitude = _amplitude(sxx, sdd, sine, centres)
    return Reading(omega, noise, amplitude, _single_phases(first, amplitude, component))


def _amplitude(
    sxx: Float64Array, sdd: Float64Array, sine: Float64Array, centres: int
) -> float | None:
    """``A`` from the best-conditioned pair (the largest ``sin ω``), if it is conditioned."""
    best = int(np.nanargmax(np.where(sxx > 0, sine, np.nan))) if np.any(sxx > 0) else None
    if best is not None and sine[best] > 0.2:
        return math.sqrt((sxx[best] + sdd[best] / (4 * sine[best] ** 2)) / centres)
    return None


def _single_phases(
    first: Float64Array, amplitude: float | None, component: str
) -> list[Float64Array]:
    """The first row's phases: cos or sin alone leaves two for each value."""
    if amplitude is None:
        return []
    ratio = np.clip(first[0] / amplitude, -1.0, 1.0)
    if component == "cos":
        return [np.arccos(ratio), -np.arccos(ratio)]
    return [np.arcsin(ratio), np.pi - np.arcsin(ratio)]
