"""``offset_mismatch``: the phases of the cache's first row are those of another position,
found by a ladder of pairs from the slowest up."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.conformance.reading import Reading
from posenc.schemes.rope.conformance.rows import Float64Array, Model, table_length
from posenc.schemes.rope.scaling import scaled

# Offsets searched: candidate positions of the slowest pair, and pairs on the phase ladder.
_MAX_CANDIDATES = 1 << 14
_LADDER = 32
_PHASE_TOLERANCE = 1e-2
_MAX_POSITION = 2**31


def fit_offset(
    model: Model, reading: Reading, component: str, n: int
) -> tuple[Model, list[Finding]]:
    """``model`` starting at the position the first row holds, when that is another one."""
    offset = _first_position(model, reading, component, n)
    if offset is None or offset == model.offset:
        return model, []
    return replace(model, offset=offset), [
        Finding(
            "offset_mismatch",
            f"the cache starts at position {offset}, not at the stated {model.offset}",
            {
                "fitted_offset": offset,
                "stated_offset": model.offset,
                "shift": offset - model.offset,
            },
        )
    ]


def _first_position(model: Model, reading: Reading, component: str, n: int) -> int | None:
    """The position whose phases the first row holds, by a ladder from the slowest pair up.

    The slowest pair gives candidates ``(φ + 2πk)/ω`` (every ``k`` up to 2^31, at most 2^14);
    each faster pair snaps each candidate to the nearest position consistent with its own phase,
    sharpening it; the candidate whose rounded position fits every pair of the ladder best
    wins, if it fits to within 0.01 rad. O(2^14 · 32).
    """
    if not reading.first_phases:
        return None
    omega = scaled(model.params, table_length(model, n))[0].radians
    if component == "angle":
        return _angle_position(omega, reading.first_phases[0])
    order = np.argsort(omega)
    order = order[omega[order] > 0]
    if not len(order):
        return None
    spread = np.linspace(0, len(order) - 1, min(_LADDER, len(order))).round().astype(np.intp)
    ladder = order[np.unique(spread)]
    if (
        _phase_misfit(np.array([float(model.offset)]), omega, ladder, reading)[0]
        <= _PHASE_TOLERANCE
    ):
        return model.offset
    slowest = float(omega[ladder[0]])
    period = 2 * math.pi / slowest
    turns = min(_MAX_CANDIDATES // len(reading.first_phases), int(_MAX_POSITION / period) + 1)
    starts = [
        (np.mod(phases[ladder[0]], 2 * math.pi) + 2 * math.pi * np.arange(turns)) / slowest
        for phases in reading.first_phases
    ]
    positions = np.rint(_climb(np.concatenate(starts), omega, ladder, reading))
    misfit = _phase_misfit(positions, omega, ladder, reading)
    best = int(np.argmin(misfit))
    if misfit[best] > _PHASE_TOLERANCE or not 0 <= positions[best] < _MAX_POSITION:
        return None
    return int(positions[best])


def _angle_position(omega: Float64Array, phases: Float64Array) -> int | None:
    """Angles are unwrapped: the fastest pair gives the position, and every pair must agree."""
    k = int(np.argmax(omega))
    position = round(float(phases[k]) / float(omega[k]))
    residual = np.abs(position * omega - phases)
    fits = np.all(residual <= 1e-3 * np.maximum(1.0, np.abs(phases)))
    return position if fits and 0 <= position < _MAX_POSITION else None


def _climb(
    candidates: Float64Array,
    omega: Float64Array,
    ladder: npt.NDArray[np.intp],
    reading: Reading,
) -> Float64Array:
    """Each candidate snapped, pair by pair up the ladder, to the nearest position that the
    pair's phase (any of its readings) allows."""
    for pair in ladder[1:]:
        w = float(omega[pair])
        snapped = []
        for phases in reading.first_phases:
            k = np.rint((candidates * w - phases[pair]) / (2 * math.pi))
            snapped.append((phases[pair] + 2 * math.pi * k) / w)
        stacked = np.stack(snapped)
        nearest = np.argmin(np.abs(stacked - candidates), axis=0)
        candidates = stacked[nearest, np.arange(len(candidates))]
    return candidates


def _phase_misfit(
    positions: Float64Array,
    omega: Float64Array,
    ladder: npt.NDArray[np.intp],
    reading: Reading,
) -> Float64Array:
    """The largest phase gap (rad) over the ladder of each candidate first position."""
    misfit = np.zeros(len(positions))
    for pair in ladder:
        gaps = [
            np.abs(np.angle(np.exp(1j * (positions * omega[pair] - phases[pair]))))
            for phases in reading.first_phases
        ]
        misfit = np.maximum(misfit, np.min(np.stack(gaps), axis=0))
    return misfit
