"""What went wrong, when the kernel's angles are not the model's under any recipe: each fault of
the issue's table is a :class:`~.angles.Turning` of the model's rope, computed by every recipe
and held to the cells as the model itself was. A fault is named only when its turning explains
every cell within the resolution the dtypes allow, under some recipe — never a guess.

Tried in this order, the simplest first: the pairs turned the other way (``reversed_rotation``),
the rope applied two or three times (``double_rotation``), then what the recovered cache fits
(:mod:`.cache`: another base or scaling, positions shifted by ``k``); M-RoPE's sections read pair
by pair (``mrope_section_mismatch``). What no turning explains is described: angles that err
in proportion to ``pos·ω`` (``angle_precision``), tokens at distinct positions turned alike
(``collapsed_positions``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding, collapsed_finding, precision_name
from posenc.schemes.rope.applied import cache, loops
from posenc.schemes.rope.applied.angles import Fit, Ids, Turning, every_recipe, held_in
from posenc.schemes.rope.applied.measure import spread_tokens
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.scaling import frequencies

Float64Array = npt.NDArray[np.float64]
# Fewer bits than this in the angles is a wrong frequency rather than a low precision.
_FEWEST_BITS = 7.0


@dataclass(frozen=True)
class Cells:
    """The cells a fault is held to: their statistics, the ids of their tokens, which id turns
    each pair, and the pairs that turn (the others were found still)."""

    stats: Float64Array
    ids: Ids
    id_rows: npt.NDArray[np.intp]
    turning_pairs: npt.NDArray[np.intp]
    head: int  # the arrays' head width

    def of_tokens(self, tokens: npt.NDArray[np.intp]) -> Cells:
        return replace(self, stats=self.stats[:, tokens], ids=self.ids[:, tokens])

    def fits(self, turning: Turning) -> dict[str, Fit | str]:
        every = every_recipe(self.stats, turning, self.ids, self.id_rows)
        return of_pairs(every, self.turning_pairs)


def of_pairs(fits: dict[str, Fit | str], pairs: npt.NDArray[np.intp]) -> dict[str, Fit | str]:
    """The fits of ``pairs`` alone."""
    return {
        recipe: fit
        if isinstance(fit, str)
        else Fit(fit.angle_ok[:, pairs], fit.ratio_ok[:, pairs], fit.error[:, pairs])
        for recipe, fit in fits.items()
    }


@dataclass(frozen=True)
class Explained:
    turning: Turning
    recipe: str
    fit: Fit
    findings: list[Finding]


def angles_hold(fits: dict[str, Fit | str]) -> str | None:
    """The recipe under which the angles hold with the smallest error (magnitudes aside)."""
    holding = sorted(
        (fit.max_error, recipe)
        for recipe, fit in fits.items()
        if isinstance(fit, Fit) and fit.angles_hold
    )
    return holding[0][1] if holding else None


def explain(cells: Cells, stated: Turning) -> Explained | None:
    """The first candidate turning whose angles hold, tried on a spread of tokens and then on
    every token, with the findings that name how it differs from ``stated``."""
    spread = cells.of_tokens(spread_tokens(cells.stats.shape[1]))
    for turning, findings in _candidates(cells, stated):
        if angles_hold(spread.fits(turning)) is None:
            continue
        fits = cells.fits(turning)
        recipe = angles_hold(fits)
        if recipe is not None:
            fit = fits[recipe]
            assert isinstance(fit, Fit)
            return Explained(turning, recipe, fit, findings)
    return None


def _candidates(cells: Cells, stated: Turning) -> Any:
    """(turning, findings) pairs, simplest first; the fitted ones only when the recovered cache
    (:mod:`.cache`) reads them."""
    other = replace(stated, times=-stated.times)
    yield other, [_reversed()]
    for times in (2, 3):
        yield replace(stated, times=times * stated.times), [_double(times)]
    for dtype in ("bfloat16", "float16"):
        held = held_in(cells.ids, dtype)
        if (held != cells.ids).any():
            yield replace(stated, held_in=dtype), [_held(cells.ids, held, dtype)]
    fitted = cache.fit(stated.params, cells.stats, cells.ids, cells.head)
    if fitted is None:
        return
    findings = list(fitted.findings)
    if fitted.shift:
        findings.append(_offset(fitted.shift, int(cells.ids[0].min())))
    if findings:
        yield replace(stated, params=fitted.params, shift=fitted.shift), findings


def _reversed() -> Finding:
    return Finding(
        "reversed_rotation",
        "every pair turns the other way, by −θ: the kernel negates sin (or rotates (x₂, x₁))",
        {"times": -1},
    )


def _double(times: int) -> Finding:
    return Finding(
        "double_rotation",
        f"every angle is {times} times the model's: the rope was applied {times} times",
        {"times": times},
    )


def _held(ids: Ids, held: Ids, dtype: str) -> Finding:
    """Positions a low-precision float rounds onto others'."""
    moved = np.flatnonzero((held != ids).any(axis=0))
    first = int(moved[0])
    return Finding(
        "collapsed_positions",
        f"the kernel turns each token as its position rounded to {dtype} ({len(moved)} tokens "
        f"moved, first position {int(ids[0][first])} turned as {int(held[0][first])}): "
        "positions held in a low-precision type",
        {
            "positions_dtype": dtype,
            "moved_tokens": len(moved),
            "examples": [[int(ids[0][k]), int(held[0][k])] for k in moved[:5]],
        },
    )


def _offset(shift: int, first: int) -> Finding:
    return Finding(
        "offset_mismatch",
        f"each token is turned as position p {'+' if shift > 0 else '−'} {abs(shift)}: the "
        f"kernel's positions are shifted by {shift} (the first token, at {first}, turned as "
        f"{first + shift})",
        {"shift": shift, "stated_first_position": first, "fitted_first_position": first + shift},
    )


def sections(cells: Cells, stated: Turning, expected_rows: npt.NDArray[np.intp]) -> Finding | None:
    """Which of M-RoPE's three ids turns each pair, read pair by pair (every recipe tried);
    named where it is another than the model's section says. None where the ids do not tell
    (each token's three ids equal) or the rows fit as stated."""
    if cells.ids.shape[0] != 3 or (cells.ids == cells.ids[:1]).all():
        return None
    # Read on a spread of tokens (the image's among them: the ids differ there first).
    differ = np.flatnonzero((cells.ids != cells.ids[:1]).any(axis=0))
    spread = np.union1d(spread_tokens(cells.stats.shape[1]), differ[spread_tokens(len(differ))])
    sample = cells.of_tokens(spread)
    fitting = np.zeros((3, len(expected_rows)), dtype=bool)
    for row in range(3):
        rows = np.full(len(expected_rows), row, np.intp)
        fits = replace(sample, id_rows=rows, turning_pairs=np.arange(len(rows))).fits(stated)
        for fit in fits.values():
            if isinstance(fit, Fit):
                fitting[row] |= fit.angle_ok.all(axis=0)
    measured = np.where(fitting[expected_rows, np.arange(len(expected_rows))], expected_rows, -1)
    for pair in np.flatnonzero(measured < 0):
        found = np.flatnonzero(fitting[:, pair])
        if len(found) == 1:
            measured[pair] = found[0]
    wrong = np.flatnonzero(measured != expected_rows)
    if not len(wrong) or (measured[wrong] < 0).all():
        return None
    names = ("temporal", "height", "width")
    moved = [int(p) for p in wrong if measured[p] >= 0]
    turned = np.where(measured >= 0, measured, expected_rows)
    every = replace(cells, id_rows=turned, turning_pairs=np.array(moved, np.intp))
    if angles_hold(every.fits(stated)) is None:  # the rows read off the spread, on every token
        return None
    counts = {names[r]: int((measured == r).sum()) for r in range(3)}
    return Finding(
        "mrope_section_mismatch",
        f"{len(moved)} pairs turn by another of the three ids than the model's sections say "
        f"(first: pair {moved[0]} by the {names[measured[moved[0]]]} id, not the "
        f"{names[expected_rows[moved[0]]]} one); pairs per id as turned: {counts}",
        {
            "pairs": moved[:64],
            "measured_rows": [int(measured[p]) for p in moved[:64]],
            "expected_rows": [int(expected_rows[p]) for p in moved[:64]],
            "pairs_by_id": counts,
        },
    )


def precision(cells: Cells, params: RopeParams, exact: Fit) -> Finding | None:
    """Angle errors bounded by ``2^-b · pos·ω`` with ``b`` between 7 and 30 bits, spread over
    the cells rather than gathered at a few: angles formed in a low precision (bfloat16 ~8
    bits, float32 ~24)."""
    ids = cells.ids
    turns, _ = frequencies(params, int(ids.max()) + 1)
    omega = turns.radians[cells.turning_pairs]
    positions = ids[cells.id_rows[cells.turning_pairs], :].T.astype(np.float64)
    angle = positions * omega[None, :]
    sharp = cells.stats[loops.SHARPEST][:, cells.turning_pairs]
    with np.errstate(invalid="ignore", divide="ignore"):
        above = np.maximum(exact.error - 2 * sharp, 0.0)
        relative = np.where((angle > 0) & np.isfinite(above), above / angle, 0.0)
    worst = float(relative.max(initial=0.0))
    if worst <= 0:
        return None
    bits = -math.log2(worst)
    visible = relative > worst / 8
    if not _FEWEST_BITS <= bits <= 30 or visible.mean() < 0.05:
        return None
    first = int(positions[visible].min())
    return Finding(
        "angle_precision",
        f"the angles err by up to 2^-{bits:.1f} · pos·ω: they carry about {bits:.0f} bits, as "
        f"when pos·ω is formed in a {precision_name(bits)}",
        {"implied_bits": round(bits, 1), "largest_relative_error": worst, "from_position": first},
    )


def collapsed(cells: Cells, exact: Fit) -> Finding | None:
    """Tokens at distinct positions (one id each) that the kernel turned alike, to within the
    resolution, where the model turns them apart: positions held in a low-precision type."""
    if cells.ids.shape[0] != 1:
        return None
    positions = cells.ids[0]
    order = np.argsort(positions, kind="stable")
    stats = cells.stats[:, order][:, :, cells.turning_pairs]
    mean = np.arctan2(stats[loops.CROSS], stats[loops.DOT])
    step = np.abs(np.angle(np.exp(1j * (mean[1:] - mean[:-1]))))
    allowed = stats[loops.SHARPEST][1:] + stats[loops.SHARPEST][:-1]
    distinct = np.diff(positions[order]) != 0
    with np.errstate(invalid="ignore"):
        alike = np.all(step <= allowed, axis=1) & distinct
    if not alike.any() or exact.angles_hold:
        return None
    later = np.flatnonzero(alike) + 1
    return collapsed_finding(order[later - 1], order[later], positions)
