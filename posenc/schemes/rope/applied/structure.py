"""Which dimensions the kernel turned, and in which pairs: the pairing that keeps every pair's
length (a rotation does; the wrong pairs mix two pairs and do not), the columns outside the
rope that moved, the pairs inside it that stayed still."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.applied import angles, measure
from posenc.schemes.rope.applied.expected import Expected
from posenc.schemes.rope.applied.measure import Data

# A pairing keeps lengths when one magnitude fits this share of its cells (all, but for the
# rare sample whose rounding a bound does not foresee).
KEEP = 0.999
RELAID = "interleaved_to_rotate_half"
_NAMES = {"split": "(i, i + d/2), rotate_half", "interleaved": "(2i, 2i + 1), GPT-J"}


@dataclass(frozen=True)
class Structure:
    """The pairing that keeps lengths in the rope's dimensions (None: none does), each
    pairing's share of cells that keep one length, the columns of the head that moved outside
    them, and the findings this reading makes."""

    pairing: str | None
    columns: npt.NDArray[np.int64]
    kept: dict[str, float]
    moved_outside: list[int]
    findings: list[Finding] = field(default_factory=list)
    # Where no pairing keeps lengths: the first and last + 1 of the columns that moved.
    span: tuple[int, int] | None = None


def expected_pairing(expected: Expected) -> str:
    return RELAID if expected.relaid else expected.pairs


def pairings(expected: Expected, offset: int, width: int) -> dict[str, npt.NDArray[np.int64]]:
    """The columns of each pairing a kernel may have turned the rope's dims in."""
    found = {layout: measure.pairs(layout, offset, width) for layout in ("split", "interleaved")}
    if expected.relaid:
        found[RELAID] = measure.pairs("split", offset, width, relaid=True)
    return found


def _read_any(given: Data, columns: npt.NDArray[np.int64]) -> bool:
    sample = measure.spread_tokens(given.tokens)
    return measure.lengths(measure.cells(given, columns, sample)).read > 0


def _kept(given: Data, candidates: dict[str, npt.NDArray[np.int64]]) -> dict[str, float]:
    sample = measure.spread_tokens(given.tokens)
    return {
        name: measure.lengths(measure.cells(given, columns, sample)).kept
        for name, columns in candidates.items()
    }


def read(given: Data, expected: Expected) -> Structure:
    """The pairing (tried on a spread of tokens), and the columns that moved outside the rope."""
    start, width = expected.rotary_offset, expected.width
    outside = np.array(
        [c for c in range(given.head) if not start <= c < start + width], dtype=np.int64
    )
    moved = measure.moved(given, outside)
    moved_outside = [int(c) for c in outside[moved > 1]]
    findings = [_turned_outside(expected, moved_outside, given.head)] if moved_outside else []
    if expected.params is None:
        return Structure(None, np.zeros((4, 0), np.int64), {}, moved_outside, findings)
    candidates = pairings(expected, start, width)
    kept = _kept(given, candidates)
    wanted = expected_pairing(expected)
    if not any(kept.values()) and not _read_any(given, candidates[wanted]):
        # Nothing to read (zero vectors): the verdict says so; no pairing is blamed.
        return Structure(wanted, candidates[wanted], kept, moved_outside, findings)
    chosen = _chosen(candidates, kept, wanted, moved_outside, findings)
    if chosen is not None:
        return chosen
    every = np.arange(given.head, dtype=np.int64)
    moved_columns = np.flatnonzero(measure.moved(given, every) > 1)
    span = (int(moved_columns[0]), int(moved_columns[-1]) + 1) if len(moved_columns) else None
    findings.append(_elsewhere(given, expected, span) or _not_a_rotation(kept))
    return Structure(None, candidates[wanted], kept, moved_outside, findings, span)


def _chosen(
    candidates: dict[str, npt.NDArray[np.int64]],
    kept: dict[str, float],
    wanted: str,
    moved_outside: list[int],
    findings: list[Finding],
) -> Structure | None:
    """The expected pairing if it keeps lengths, else the one that keeps them best (a
    ``pairing_mismatch``), else None."""
    keeping = sorted((name for name in kept if kept[name] >= KEEP), key=lambda n: -kept[n])
    if wanted in keeping:
        return Structure(wanted, candidates[wanted], kept, moved_outside, list(findings))
    if not keeping:
        return None
    found = keeping[0]
    listed = [pairing_mismatch(found, wanted, kept), *findings]
    return Structure(found, candidates[found], kept, moved_outside, listed)


def pairing_mismatch(found: str, wanted: str, kept: dict[str, float]) -> Finding:
    return Finding(
        "pairing_mismatch",
        f"the kernel turns pairs {_NAMES.get(found, found)}, where the model turns "
        f"{_NAMES.get(wanted, wanted)}: only that pairing keeps every pair's length",
        {"measured": found, "expected": wanted, "lengths_kept": kept},
    )


def _not_a_rotation(kept: dict[str, float]) -> Finding:
    return Finding(
        "not_a_rotation",
        "no pairing keeps each pair's length: what came out is not the input rotated pair by "
        "pair (dimensions mixed, scaled or overwritten)",
        {"lengths_kept": kept},
    )


def _turned_outside(expected: Expected, columns: list[int], head: int) -> Finding:
    start, end = expected.rotary_offset, expected.rotary_offset + expected.width
    what = (
        f"layer {expected.layer} has no rope (a NoPE layer)"
        if expected.params is None
        else f"the model turns dimensions {start} … {end - 1} only"
    )
    one = expected.head_dim or expected.width
    if one and head > one and head % one == 0 and start == 0:
        what += f" (if the last axis holds {head // one} heads of {one}, give head_dim={one})"
    return Finding(
        "partial_rotary",
        f"{len(columns)} dimensions that should come out unchanged moved (first {columns[0]}): "
        f"{what}",
        {"moved_dimensions": _runs(columns), "rotary_dims": [start, end]},
    )


def _elsewhere(given: Data, expected: Expected, span: tuple[int, int] | None) -> Finding | None:
    """Where no pairing keeps lengths in the rope's dimensions: the span of columns that
    moved, if pairs over it keep them (the kernel turned another width)."""
    if span is None:
        return None
    start, end = span
    width = end - start
    if width % 2 or (start, width) == (expected.rotary_offset, expected.width):
        return None
    found = _kept(given, pairings(expected, start, width))
    keeping = [name for name, share in found.items() if share >= KEEP]
    if not keeping:
        return None
    return Finding(
        "partial_rotary",
        f"the kernel turns dimensions {start} … {end - 1} in pairs "
        f"{_NAMES.get(keeping[0], keeping[0])}, where the model turns {expected.rotary_offset} "
        f"… {expected.rotary_offset + expected.width - 1}",
        {
            "measured_dims": [start, end],
            "rotary_dims": [expected.rotary_offset, expected.rotary_offset + expected.width],
            "measured_pairs": keeping[0],
            "lengths_kept": found,
        },
    )


def still_pairs(stats: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """The pairs every cell of which allows no rotation at all (angle 0, length kept)."""
    shape = stats.shape[1:]
    none = angles.fit(stats, np.ones(shape), np.zeros(shape))
    still: npt.NDArray[np.bool_] = np.all(none.angle_ok & none.ratio_ok, axis=0)
    return still


def left_still(expected: Expected, pairs: npt.NDArray[np.intp], turning: int) -> Finding:
    """Pairs that should turn (their rotation shows at these positions) but came out still."""
    start = expected.rotary_offset
    return Finding(
        "partial_rotary",
        f"{len(pairs)} of the rope's {expected.width // 2} pairs came out unchanged where the "
        f"model turns them (first pair {int(pairs[0])}): the kernel turned {turning} pairs",
        {
            "still_pairs": _runs([int(p) for p in pairs]),
            "turning_pairs": turning,
            "rotary_dims": [start, start + expected.width],
        },
    )


def _runs(values: list[int]) -> list[list[int]]:
    """Sorted integers as ``[first, last]`` runs."""
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return runs
