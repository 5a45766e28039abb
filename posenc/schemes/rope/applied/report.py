"""The answer's JSON: the verdict, the rope expected, what was measured — the pairs, the
dimensions turned, the magnitude, the recipe, each recipe's largest angle error, the resolution
— the angle error by position, by pair and as a map of both (binned, so that the answer stays
small whatever the arrays), and each finding with its evidence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.applied import loops, measure, structure
from posenc.schemes.rope.applied.angles import Fit
from posenc.schemes.rope.applied.expected import Expected
from posenc.schemes.rope.applied.measure import Data

# The most entries of angle_error_by_position, and the sides of angle_error_map.
MOST_POSITIONS = 4096
MAP_POSITIONS = 128
MAP_PAIRS = 128


@dataclass(frozen=True)
class Measured:
    """The recipe that holds (with the others that do), the fit errors are reported against
    (the recipe's, else exact's), and every recipe's fit or why it has no such rope."""

    recipe: str | None
    also: list[str]
    reference: Fit | None
    fits: dict[str, Fit | str]


def document(
    expected: Expected,
    given: Data,
    ids: npt.NDArray[np.int64],
    read: structure.Structure,
    stats: npt.NDArray[np.float64] | None,
    measured: Measured | None,
    findings: list[Finding],
    holds: bool | None,
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "holds": holds,
        "reason": reason,
        "expected": expected.describe(),
        "measured": _measured(expected, given, ids, read, stats, measured),
        "diagnosis": [
            {"name": f.name, "detail": f.summary, "evidence": _plain(f.evidence)} for f in findings
        ],
    }


def _measured(
    expected: Expected,
    given: Data,
    ids: npt.NDArray[np.int64],
    read: structure.Structure,
    stats: npt.NDArray[np.float64] | None,
    measured: Measured | None,
) -> dict[str, Any]:
    lengths = None if stats is None else measure.lengths(stats)
    reference = None if measured is None else measured.reference
    sharpest = None if stats is None else stats[loops.SHARPEST]
    resolution = None
    if sharpest is not None and np.isfinite(sharpest).any():
        resolution = float(np.median(sharpest[np.isfinite(sharpest)]))
    return {
        "tokens": given.tokens,
        "samples": given.samples,
        "head_dim": given.head,
        "dtypes": {"before": given.before.dtype, "after": given.after.dtype},
        "pairs": read.pairing,
        "lengths_kept": read.kept,
        "rotated_dims": _rotated(expected, read, stats),
        "magnitude": None if lengths is None else lengths.magnitude,
        "recipe": None if measured is None else measured.recipe,
        "also_within": [] if measured is None else measured.also,
        "recipes": {} if measured is None else _recipes(measured.fits),
        "max_angle_error": None if reference is None else _number(reference.max_error),
        "resolution": resolution,
        **_errors(ids, reference),
    }


def _rotated(
    expected: Expected, read: structure.Structure, stats: npt.NDArray[np.float64] | None
) -> list[int] | None:
    if stats is None and read.span is not None:
        return list(read.span)
    columns = list(read.moved_outside)
    if stats is not None:
        turned = ~structure.still_pairs(stats)
        columns += [int(c) for c in read.columns[2:, turned].reshape(-1)]
    if not columns:
        return None
    return [min(columns), max(columns) + 1]


def _recipes(fits: dict[str, Fit | str]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for recipe, fit in fits.items():
        if isinstance(fit, str):
            shown[recipe] = {"holds": None, "reason": fit}
        else:
            shown[recipe] = {
                "holds": fit.holds,
                "angles_hold": fit.angles_hold,
                "lengths_hold": bool(fit.ratio_ok.all()),
                "max_angle_error": _number(fit.max_error),
            }
    return shown


def _errors(ids: npt.NDArray[np.int64], reference: Fit | None) -> dict[str, Any]:
    """The largest angle error of each token (binned in position order to at most
    MOST_POSITIONS entries, each the first position of its bin), of each pair, and both as a
    map of at most MAP_POSITIONS × MAP_PAIRS."""
    if reference is None:
        return {
            "positions": [],
            "angle_error_by_position": [],
            "angle_error_by_pair": [],
            "angle_error_map": None,
        }
    order = np.argsort(ids[0], kind="stable")
    error = np.where(np.isnan(reference.error), -1.0, reference.error)[order]
    positions = ids[0][order]
    by_position, firsts = _binned(error.max(axis=1), positions, MOST_POSITIONS)
    rows = _bins(len(order), MAP_POSITIONS)
    columns = _bins(error.shape[1], MAP_PAIRS)
    grid = np.maximum.reduceat(np.maximum.reduceat(error, rows, axis=0), columns, axis=1)
    return {
        "positions": firsts,
        "angle_error_by_position": by_position,
        "angle_error_by_pair": _listed(error.max(axis=0)),
        "angle_error_map": {
            "positions": [int(p) for p in positions[rows]],
            "pairs": [int(c) for c in columns],
            "values": [_listed(row) for row in grid],
        },
    }


def _bins(count: int, most: int) -> npt.NDArray[np.intp]:
    """The first index of each of at most ``most`` bins of ``count`` items."""
    starts: npt.NDArray[np.intp] = np.unique(
        np.linspace(0, count, min(count, most), endpoint=False).astype(np.intp)
    )
    return starts


def _binned(
    values: npt.NDArray[np.float64], positions: npt.NDArray[np.int64], most: int
) -> tuple[list[float | None], list[int]]:
    starts = _bins(len(values), most)
    return _listed(np.maximum.reduceat(values, starts)), [int(p) for p in positions[starts]]


def _listed(values: npt.NDArray[np.float64]) -> list[float | None]:
    """Errors as JSON numbers; a cell nothing was read in (-1 here) as null."""
    return [None if v < 0 else float(v) for v in values.tolist()]


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
