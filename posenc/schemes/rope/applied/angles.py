"""The rotation a rope gives each cell (token, pair), as each recipe posenc serves computes it,
held to the cells a kernel's arrays show.

A cell's rotation is ``z = c + i·s``: the cos and sin the recipe computes for that token's
position (M-RoPE: the id the pair's section names), times the attention factor. A fault is a
:class:`Turning` of the same rope — another base or scaling, positions shifted, angles turned
the other way or twice (``z^k``) — computed by the same recipes, so that a fault planted on a
float32 kernel is recognised at positions where float32 is far from exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import numpy.typing as npt

from posenc.errors import PosencError
from posenc.numerics import bfloat16
from posenc.numerics.exact import MAX_POSITION, sincos
from posenc.schemes.rope import recipes
from posenc.schemes.rope.applied import loops
from posenc.schemes.rope.params import Recipe, RopeParams
from posenc.schemes.rope.recipes import framework
from posenc.schemes.rope.scaling import frequencies

Float64Array = npt.NDArray[np.float64]
Ids = npt.NDArray[np.int64]
RECIPES = ("exact", "framework", "ggml", "mlx")


@dataclass(frozen=True)
class Turning:
    """How a kernel may have turned: ``params``'s rope at positions ``+ shift``, each angle
    ``times`` over (−1: the other way; 2: twice), magnitudes to the same power."""

    params: RopeParams
    shift: int = 0
    times: int = 1
    # The positions as a low-precision float holds them (``bfloat16``, ``float16``), if so.
    held_in: str | None = None


@dataclass(frozen=True)
class Fit:
    """A turning against the cells: where its angle lies in each cell's interval, where its
    magnitude does, and the largest angle error to any sample of each cell (NaN: none read)."""

    angle_ok: npt.NDArray[np.bool_]
    ratio_ok: npt.NDArray[np.bool_]
    error: Float64Array

    @property
    def angles_hold(self) -> bool:
        return bool(self.angle_ok.all())

    @property
    def holds(self) -> bool:
        return self.angles_hold and bool(self.ratio_ok.all())

    @property
    def max_error(self) -> float:
        return float(np.nanmax(self.error, initial=0.0))


def rotations(
    turning: Turning, recipe: str, ids: Ids, id_rows: npt.NDArray[np.intp]
) -> tuple[Float64Array, Float64Array]:
    """cos and sin ``(n, h)`` of each cell as ``recipe`` computes ``turning`` for the ``(r, n)``
    ids (one row a token, or M-RoPE's three), pair ``i`` turned by row ``id_rows[i]``.
    Raises :class:`PosencError` where the recipe has no such rope."""
    shifted = ids + turning.shift
    if turning.held_in is not None:
        shifted = held_in(shifted, turning.held_in)
    if shifted.min() < 0 or shifted.max() > MAX_POSITION:
        raise PosencError("positions shifted past the range a rope is served for")
    rows, n = shifted.shape
    flat = shifted.reshape(-1)
    seq_len = int(flat.max()) + 1  # a dynamic rope's length, as for /v1/rope/encode
    params = turning.params
    if recipe == "exact":
        turns, attention = frequencies(params, seq_len)
        sin, cos = sincos(flat, turns)
        cos, sin = cos * attention, sin * attention
    else:
        chosen = replace(params, recipe=cast(Recipe, recipe), framework_precision=None, n_ctx=None)
        prepare = framework.prepare if recipe == "framework" else recipes.prepare
        c32, s32, _ = prepare(chosen, seq_len)(flat)
        cos, sin = c32.astype(np.float64), s32.astype(np.float64)
    if rows > 1:
        pick = (id_rows[None, :] * n + np.arange(n)[:, None]).astype(np.intp)
        cos = np.take_along_axis(cos, pick, axis=0)
        sin = np.take_along_axis(sin, pick, axis=0)
    if turning.times != 1:
        power = (cos + 1j * sin) ** turning.times
        cos, sin = power.real, power.imag
    return cos, sin


def held_in(ids: Ids, dtype: str) -> Ids:
    """Positions rounded to the nearest ``bfloat16`` or ``float16`` (ties to even), as a
    kernel that holds them in that type turns them."""
    if dtype == "float16":
        return np.minimum(ids, 65504).astype(np.float16).astype(np.int64)
    return bfloat16.rounded(ids.astype(np.float32)).astype(np.int64)


def fit(stats: Float64Array, cos: Float64Array, sin: Float64Array, slack: float = 0.0) -> Fit:
    """``cos``, ``sin`` against the cells' intervals (widened by ``slack`` of each cell's
    sharpest resolution, for a kernel that rounded twice)."""
    mean = np.arctan2(stats[loops.CROSS], stats[loops.DOT])
    offset = _wrapped(np.arctan2(sin, cos) - mean)
    read = np.isfinite(stats[loops.LOW])
    widen = slack * np.where(read, stats[loops.SHARPEST], 0.0)
    with np.errstate(invalid="ignore"):
        inside = (offset >= stats[loops.LOW] - widen) & (offset <= stats[loops.HIGH] + widen)
        error = np.maximum(
            np.abs(offset - stats[loops.SMALLEST]), np.abs(stats[loops.LARGEST] - offset)
        )
    magnitude = np.hypot(cos, sin)
    counted = stats[loops.READ] > 0
    ratio_widen = slack * magnitude * np.where(read, stats[loops.SHARPEST], 0.0)
    ratio_ok = ~counted | (
        (magnitude >= stats[loops.RATIO_LOW] - ratio_widen)
        & (magnitude <= stats[loops.RATIO_HIGH] + ratio_widen)
    )
    return Fit(inside | ~read, ratio_ok, np.where(read, error, np.nan))


def _wrapped(angle: Float64Array) -> Float64Array:
    wrapped: Float64Array = np.mod(angle + math.pi, 2 * math.pi) - math.pi
    return wrapped


def every_recipe(
    stats: Float64Array, turning: Turning, ids: Ids, id_rows: npt.NDArray[np.intp]
) -> dict[str, Fit | str]:
    """The turning under each recipe: its fit, or why the recipe has no such rope."""
    fits: dict[str, Fit | str] = {}
    slack = float(max(abs(turning.times) - 1, 0))
    for recipe in RECIPES:
        try:
            cos, sin = rotations(turning, recipe, ids, id_rows)
        except PosencError as error:
            fits[recipe] = str(error)
            continue
        fits[recipe] = fit(stats, cos, sin, slack)
    return fits


def closest(fits: dict[str, Fit | str]) -> tuple[str | None, list[str]]:
    """The recipe whose angles and magnitudes hold — exact where it does (the data cannot tell
    a float32 recipe from the truth), else the one with the smallest error — and the others
    that hold too."""
    holding = sorted(
        (recipe != "exact", fit.max_error, recipe)
        for recipe, fit in fits.items()
        if isinstance(fit, Fit) and fit.holds
    )
    if not holding:
        return None, []
    return holding[0][2], [recipe for *_, recipe in holding[1:]]
