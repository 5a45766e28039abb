"""What a cache's rows are: the angle of each pair per position and the factor of cos and sin,
measured from the rows alone; the rope they fit; the float32 recipe they equal, if any; and
how far they are from that rope's exact table.

Each pair's angle at a sampled position is ``atan2(sin, cos)``, known modulo 2π. Position 1
gives the frequency ``ω_i`` (every rope turns less than π per position); each next sampled
position, at most twice the last, predicts the angle within a fraction of a turn, which fixes
the whole turns; the last row (the largest position) gives ``ω_i`` to about the storage type's
resolution over that position. The factor of cos and sin is their common length
``√(cos² + sin²)``, the same in every value of a rope.

The rope fitted is the model's own where one is given and its frequencies agree (within
:data:`TOLERANCE` and what the rows can resolve); else the simplest that reproduces them:
``base`` from the first two pairs' ratio (``ω_0/ω_1 = base^(2/d)``), as few significant digits
as agree; every pair divided by one factor (``linear``), or each by its own (``freq_factors``);
pairs that never turn (frequency 0) as ``rotary_pairs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.errors import ParameterError
from posenc.schemes.rope import maths
from posenc.schemes.rope.models.verdict import params_of
from posenc.schemes.rope.onnx import recipe
from posenc.schemes.rope.params import Layout, RopeParams
from posenc.schemes.rope.recipes import framework
from posenc.schemes.rope.scaling import frequencies

# Relative difference of a frequency or a factor that float32 parameters explain (the GGUF
# check's), beside what the rows can resolve.
TOLERANCE = 1e-5
# The resolution of each storage type: half an ulp of 1.
RESOLUTION = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 2.0**-53}
# Relative error of a float32 recipe's frequency and angle: a few roundings of 2^-24.
_RECIPE = 8 * 2.0**-24


@dataclass(frozen=True)
class Measured:
    positions: npt.NDArray[np.int64]
    frequencies: npt.NDArray[np.float64]  # radians per position, one per pair
    uncertainty: npt.NDArray[np.float64]  # what the rows cannot tell apart, per pair
    attention_factor: float
    rotation: bool  # every value's (cos, sin) has the one length


def measure(
    cos: npt.NDArray[np.float64],
    sin: npt.NDArray[np.float64],
    positions: npt.NDArray[np.int64],
    dtype: str,
) -> Measured:
    """The frequencies and the factor of rows ``(positions, pairs)`` of a cache."""
    eps = RESOLUTION[dtype]
    length = np.hypot(cos, sin)
    factor = float(np.median(length))
    rotation = bool(
        factor > 0 and np.all(np.abs(length - factor) <= 8 * eps * factor + 1e-300)
    ) and bool(np.all(np.abs(sin[positions == 0]) <= 4 * eps * factor))
    angle = np.arctan2(sin, cos)
    omega = np.zeros(cos.shape[1])
    for k, p in enumerate(positions.tolist()):
        if p == 0:
            continue
        if p == 1 or not omega.any():
            omega = angle[k] / p
            continue
        turns = np.round((omega * p - angle[k]) / (2 * math.pi))
        omega = (angle[k] + 2 * math.pi * turns) / p
    last = max(int(positions[-1]), 1)
    uncertainty = 4 * eps / (max(factor, eps) * last) + _RECIPE * np.abs(omega)
    return Measured(positions, omega, uncertainty, factor, rotation)


def agree(measured: Measured, omega: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Which pairs' measured frequencies are ``omega``, within what the rows resolve."""
    if len(omega) != len(measured.frequencies):
        return np.zeros(len(measured.frequencies), dtype=bool)
    difference = np.abs(measured.frequencies - omega)
    return difference <= TOLERANCE * np.abs(omega) + measured.uncertainty


def factor_agrees(measured: float, expected: float, dtype: str) -> bool:
    return abs(measured - expected) <= (TOLERANCE + 8 * RESOLUTION[dtype]) * abs(expected)


def exact(params: RopeParams, seq_len: int) -> tuple[npt.NDArray[np.float64], float]:
    """A rope's exact frequencies (radians per position) and attention factor."""
    turns, attention = frequencies(params, seq_len)
    return np.asarray(turns.radians, np.float64), attention


def fit(
    measured: Measured, hint: RopeParams | None, seq_len: int, interleaved: bool
) -> RopeParams | None:
    """The rope the rows fit: ``hint`` (the model's) where its frequencies agree, else the
    simplest that does; None where the rows are not one rope's."""
    layout: Layout = "interleaved" if interleaved else "split"
    if not measured.rotation:
        return None
    if hint is not None and hint.d_model == 2 * len(measured.frequencies):
        if bool(np.all(agree(measured, exact(hint, seq_len)[0]))):
            return replace(hint, layout=layout, recipe="exact")
    simplest = _simplest(measured, layout, None)
    if hint is not None and (simplest is None or simplest.freq_factors is not None):
        # Factors of its own on each pair: told against the model's base, they say which
        # pairs moved.
        return _simplest(measured, layout, hint.base) or simplest
    return simplest


def _simplest(measured: Measured, layout: Layout, base: float | None) -> RopeParams | None:
    omega, u = measured.frequencies, measured.uncertainty
    half = len(omega)
    turning = int(np.count_nonzero(np.abs(omega) > u))
    if turning == 0 or np.any(np.abs(omega[turning:]) > u[turning:]):
        return None
    given: dict[str, Any] = {"d_model": 2 * half, "layout": layout}
    if turning < half:
        given["rotary_pairs"] = turning
    if base is not None:
        given["base"] = base
    elif turning >= 2 and np.all(omega[:turning] > 0):
        given["base"] = _base(omega[:turning], u[:turning], half)
    index = np.arange(half, dtype=np.float64)
    chosen = given.get("base", 10000.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        divisors = np.where(np.arange(half) < turning, chosen ** (-index / half) / omega, 1.0)
    # Snapped to what the rows resolve; compared as the frequencies are.
    resolved = u[:turning] / np.abs(omega[:turning])
    slack = TOLERANCE + resolved
    if np.all(np.abs(divisors[:turning] - divisors[0]) <= slack * abs(divisors[0])):
        if not math.isclose(divisors[0], 1.0, rel_tol=slack[0]):
            given.update(scaling="linear", factor=_snap(float(divisors[0]), resolved[0]))
    else:
        slack = np.append(resolved, np.zeros(half - turning))
        given["freq_factors"] = [
            _snap(float(f), float(s)) for f, s in zip(divisors, slack, strict=True)
        ]
    try:
        return params_of(given)
    except ParameterError:
        return None


def _base(omega: npt.NDArray[np.float64], u: npt.NDArray[np.float64], half: int) -> float:
    """The base most pairs agree on: each two neighbours' ratio is ``base^(1/half)`` where
    neither is scaled (or both by one factor); the value most neighbours give, the first
    pairs' where none is given twice."""
    slack = half * (u[:-1] / omega[:-1] + u[1:] / omega[1:])
    candidates = (omega[:-1] / omega[1:]) ** half
    agreeing = [
        int(np.count_nonzero(np.abs(candidates - c) <= (slack + slack[k]) * c))
        for k, c in enumerate(candidates)
    ]
    k = int(np.argmax(agreeing))
    return _snap(float(candidates[k]), float(slack[k]))


def _snap(value: float, tolerance: float) -> float:
    """The number of fewest significant digits within ``tolerance`` (relative) of ``value``.

    >>> _snap(500003.2, 1e-5), _snap(1.1386294, 1e-6)
    (500000.0, 1.13863)
    """
    for digits in range(1, 10):
        rounded = float(f"{value:.{digits}g}")
        if abs(rounded - value) <= tolerance * abs(value):
            return rounded
    return float(f"{value:.9g}")


def exact_rows(
    params: RopeParams, seq_len: int, positions: npt.NDArray[np.int64], attention: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The exact cos and sin ``(n, d/2)`` of ``params``, multiplied by ``attention`` in place of
    the rope's own factor."""
    split = replace(params, layout="split", recipe="exact")
    both = maths.encode(split, positions, "float64", "cos_sin")[:, :, : params.d_model // 2]
    own = frequencies(split, seq_len)[1]
    return both[0] * (attention / own), both[1] * (attention / own)


def recipe_of(
    params: RopeParams,
    seq_len: int,
    positions: npt.NDArray[np.int64],
    attention: float,
    stored: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    dtype: str,
) -> str | None:
    """The float32 recipe whose rows, cast to the cache's type, are the stored ones within one
    ulp of that type (two where an attention factor multiplies a cos or sin that is itself
    within one ulp of torch's, as ``recipe=framework`` promises): transformers'
    (``framework``) or the builder's own."""
    split = replace(params, layout="split")
    candidates: list[tuple[str, Any]] = []
    try:
        own = framework.frequencies(replace(split, recipe="framework"), seq_len)[1]
        if factor_agrees(attention, own, dtype):
            halves = framework.prepare(replace(split, recipe="framework"), seq_len)(positions)
            candidates.append(("framework", halves[:2]))
    except ParameterError:
        pass
    candidates.append((recipe.NAME, recipe.rows(split, seq_len, positions, attention)))
    ulps = 1 if attention == 1 else 2
    for name, rows in candidates:
        if rows is not None and all(
            _within_ulp(np.asarray(mine, np.float64), theirs, dtype, ulps)
            for mine, theirs in zip(rows, stored, strict=True)
        ):
            return name
    return None


def _within_ulp(
    mine: npt.NDArray[np.float64], theirs: npt.NDArray[np.float64], dtype: str, ulps: int
) -> bool:
    kind = np.float32 if dtype in ("float32", "bfloat16") else np.dtype(dtype).type
    if dtype == "bfloat16":
        mine = _bfloat16(mine)
    else:
        mine = mine.astype(kind).astype(np.float64)
    largest = np.maximum(np.abs(mine), np.abs(theirs))
    step = np.spacing(largest.astype(kind)).astype(np.float64)
    if dtype == "bfloat16":
        step = step * 2.0**16
    return bool(np.all(np.abs(mine - theirs) <= ulps * step))


def _bfloat16(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """float32 rounded to bfloat16 (nearest, ties to even), as torch's cast does."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)
