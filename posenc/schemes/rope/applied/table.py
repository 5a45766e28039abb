"""A cos/sin table held in a narrower type than the data it turns.

A float32 kernel handed bfloat16's cos and sin (a cache kept in the model's dtype, as vLLM's
``cos_sin_cache.to(dtype)``, then applied to float32 q) turns each pair by ``a·x + b·x⊥`` with
``a`` and ``b`` on bfloat16's grid: a rotation only to bfloat16's resolution, so no pairing keeps
lengths to float32's. Each cell's ``a = Σ x·y / Σ|x|²`` and ``b = Σ x×y / Σ|x|²`` (the scaled
rotation that fits its samples best) are read from its sums, on the tokens the pairing is read
on (up to 64, spread over the sequence) and under each pairing: the table is named only where
every one of them is on the narrower type's grid, with enough of both ``a`` and ``b`` far from
the data's own rounding and from the few-bit values every grid holds (0, 1, ½) that chance
cannot put them there. The pairing whose cells are on the grid is the kernel's (the wrong one
mixes two pairs' values); the cells are then read to that type's resolution, and held to the
model's rope like any kernel's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.applied import loops, measure, structure
from posenc.schemes.rope.applied.expected import Expected
from posenc.schemes.rope.applied.measure import Data
from posenc.schemes.rope.applied.reader import PRECISION

Float64Array = npt.NDArray[np.float64]
# The types a table may be narrowed to, the coarsest first: the coarsest grid that holds every
# cell is the table's type (every bfloat16 value is a float32, and most are float16s).
NARROWER = ("bfloat16", "float16", "float32")
# A table is looked for only in a type this many bits narrower than the data: closer, the data's
# own rounding hides the grid.
LEAST_BITS_NARROWER = 12
# A value is on a grid when within this share of the grid's spacing of one of its points (plus
# the data's own rounding of it): a value off the grid lands there about 1 time in 25.
ON_GRID = 1 / 64
# Values of a and of b each that tell the grid (far above the data's rounding, more than
# FEW_BITS significant bits) before a table is named: chance agreement is then below 25^-32.
LEAST_TESTED = 16
FEW_BITS = 4
# How far the data's rounding can move a cell's a and b, in units of its dtype's epsilon times
# the cell's magnitude (the output's rounding, the kernel's two products and one sum: 2√2 at
# most), and of its smallest subnormal step over the samples' length.
DATA_ROUNDING = 8


def narrower(
    given: Data, expected: Expected, read: structure.Structure
) -> tuple[Data, structure.Structure] | None:
    """Where no pairing keeps lengths to the data's resolution: the data read at the resolution
    of the coarsest type whose grid holds every cell's rotation under one pairing, and that
    pairing's structure, ``table_precision`` first among its findings (None: no type does).
    One pass over the spread tokens per pairing tried."""
    bits = min(PRECISION[given.before.dtype][0], PRECISION[given.after.dtype][0])
    emin = PRECISION[given.after.dtype][1]
    coarser = [t for t in NARROWER if PRECISION[t][0] <= bits - LEAST_BITS_NARROWER]
    if not coarser or not read.findings or read.findings[-1].name != "not_a_rotation":
        return None
    sample = measure.spread_tokens(given.tokens)
    wanted = structure.expected_pairing(expected)
    candidates = structure.pairings(expected, expected.rotary_offset, expected.width)
    for pairing in sorted(candidates, key=lambda name: name != wanted):
        columns = candidates[pairing]
        sums = measure.cells(given, columns, sample)
        for dtype in coarser:
            tested = on_grid(sums, dtype, bits, emin)
            if not tested:
                continue
            findings = [_finding(dtype, given.after.dtype, tested, read.kept)]
            if pairing != wanted:
                findings.append(structure.pairing_mismatch(pairing, wanted, read.kept))
            findings += read.findings[:-1]  # what was read but that no pairing kept lengths
            found = structure.Structure(pairing, columns, read.kept, read.moved_outside, findings)
            return replace(given, table=dtype), found
    return None


def _finding(dtype: str, data: str, tested: int, kept_at_data: dict[str, float]) -> Finding:
    return Finding(
        "table_precision",
        f"the kernel's cos and sin are {dtype} values: a table held in {dtype} turned {data} "
        f"data, so each pair's length and angle move by up to {2.0 ** -PRECISION[dtype][0]:.3g} "
        f"(the model's rope in {data} rounds only its {data} values)",
        {"table_dtype": dtype, "values_on_grid": tested, "lengths_kept": kept_at_data},
    )


def on_grid(stats: Float64Array, dtype: str, data_bits: int, data_emin: int) -> int:
    """How many of the cells' a and b tell ``dtype``'s grid, if every one of them is on it and
    enough of each tell it; else 0."""
    read = (stats[loops.READ] > 0) & (stats[loops.XX] > 0)
    xx = stats[loops.XX][read]
    a, b = stats[loops.DOT][read] / xx, stats[loops.CROSS][read] / xx
    smallest = 2.0 ** (data_emin - data_bits + 1) * np.sqrt(stats[loops.READ][read] / xx)
    noise = DATA_ROUNDING * (2.0 ** (1 - data_bits) * np.hypot(a, b) + smallest)
    told = []
    for values in (a, b):
        rounded, spacing = grid(values, *PRECISION[dtype])
        if (np.abs(values - rounded) > ON_GRID * spacing + noise).any():
            return 0
        # Zero, one, a half … are on every grid: they tell none.
        few_bits = grid(values, FEW_BITS, PRECISION[dtype][1])[0] == values
        told.append(int(np.count_nonzero(~few_bits & (ON_GRID * spacing > 4 * noise))))
    return sum(told) if min(told) >= LEAST_TESTED else 0


def grid(values: Float64Array, bits: int, emin: int) -> tuple[Float64Array, Float64Array]:
    """``values`` rounded to the nearest of a type of ``bits`` precision whose normal numbers
    start at ``2^emin``, and its spacing there. No overflow: a cell's a and b are near its
    magnitude, far below float16's largest, 65504.

    >>> grid(np.array([1 + 2**-9, 1 + 2**-7, 3e-40]), 8, -126)[0].tolist()
    [1.0, 1.0078125, 2.7550648847397363e-40]
    """
    _, exponent = np.frexp(values)
    spacing = np.ldexp(1.0, np.maximum(exponent - 1, emin) - bits + 1)
    rounded: Float64Array = np.round(values / spacing) * spacing
    return rounded, spacing
