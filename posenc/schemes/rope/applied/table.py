"""A cos/sin table held in a narrower type than the data it turns.

A float32 kernel handed bfloat16's cos and sin (a cache kept in the model's dtype, as vLLM's
``cos_sin_cache.to(dtype)``, then applied to float32 q) turns each pair by ``a·x + b·x⊥`` with
``a`` and ``b`` on bfloat16's grid: a rotation only to bfloat16's resolution, so no pairing keeps
lengths to float32's. Each cell's ``a = Σ x·y / Σ|x|²`` and ``b = Σ x×y / Σ|x|²`` (the scaled
rotation that fits its samples best) are read from the sums the cells already hold; the table is
named only where every one of them is on the narrower type's grid, with enough of them far from
the data's own rounding that chance cannot put them there. The cells are then read again at
that type's resolution, and held to the model's rope like any kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.applied import loops, measure, structure
from posenc.schemes.rope.applied.expected import Expected
from posenc.schemes.rope.applied.measure import Data
from posenc.schemes.rope.applied.reader import PRECISION

Float64Array = npt.NDArray[np.float64]
# The types a table may be narrowed to, the coarsest first: a bfloat16 value is a float16 and a
# float32 value too, so the coarsest grid that holds every cell is the table's type.
NARROWER = ("bfloat16", "float16", "float32")
# A value is on a grid when within this share of the grid's spacing of one of its points (plus
# the data's own rounding of it): a value off the grid lands there 1 time in 32.
ON_GRID = 1 / 64
# Values tested (their spacing far above the data's rounding) before a table is named: chance
# agreement is then 32^-16.
LEAST_TESTED = 16
# How far the data's rounding can move a cell's a and b, in units of its dtype's epsilon times
# the cell's magnitude: the output's rounding and the kernel's two products and one sum.
DATA_ROUNDING = 8


@dataclass(frozen=True)
class Table:
    """The narrower type the cells' rotations are on, the data read at its resolution, and the
    structure read there."""

    dtype: str
    given: Data
    read: structure.Structure
    tested: int

    def finding(self, kept_at_data: dict[str, float]) -> Finding:
        data = self.given.after.dtype
        return Finding(
            "table_precision",
            f"the kernel's cos and sin are {self.dtype} values: a table held in {self.dtype} "
            f"turned {data} data, so each pair's length and angle move by up to "
            f"{2.0 ** -PRECISION[self.dtype][0]:.3g} (the model's rope in {data} rounds "
            f"only its {data} values)",
            {
                "table_dtype": self.dtype,
                "values_on_grid": self.tested,
                "lengths_kept": kept_at_data,
            },
        )


def narrower(given: Data, expected: Expected, read: structure.Structure) -> Table | None:
    """Where no pairing keeps lengths to the data's resolution: the narrowest type whose grid
    holds every cell's rotation, read at that type's resolution (None: none does)."""
    bits = min(PRECISION[given.before.dtype][0], PRECISION[given.after.dtype][0])
    coarser = [dtype for dtype in NARROWER if PRECISION[dtype][0] < bits]
    if not coarser or not read.findings or read.findings[-1].name != "not_a_rotation":
        return None
    widest = structure.reread(replace(given, table=coarser[0]), expected, read)
    if widest is None:
        return None
    sample = measure.spread_tokens(given.tokens)
    sums = measure.cells(given, widest.columns, sample)
    for dtype in coarser:
        tested = on_grid(sums, dtype, bits)
        if tested:
            widened = replace(given, table=dtype)
            found = structure.reread(widened, expected, read)
            return None if found is None else Table(dtype, widened, found, tested)
    return None


def on_grid(stats: Float64Array, dtype: str, data_bits: int) -> int:
    """How many of the cells' a and b test ``dtype``'s grid (their spacing in it far above the
    data's rounding), if every one of them is on it and they are enough; else 0."""
    read = (stats[loops.READ] > 0) & (stats[loops.XX] > 0)
    xx = stats[loops.XX][read]
    a, b = stats[loops.DOT][read] / xx, stats[loops.CROSS][read] / xx
    values = np.concatenate([a, b])
    noise = np.tile(DATA_ROUNDING * 2.0 ** (1 - data_bits) * np.hypot(a, b), 2)
    rounded, spacing = grid(values, *PRECISION[dtype])
    allowed = ON_GRID * spacing + noise
    if (np.abs(values - rounded) > allowed).any():
        return 0
    # Zero is on every grid, and a cell turned to nothing tells nothing of one.
    telling = (values != 0) & (noise > 0) & (ON_GRID * spacing > 4 * noise)
    tested = int(np.count_nonzero(telling))
    return tested if tested >= LEAST_TESTED else 0


def grid(values: Float64Array, bits: int, emin: int) -> tuple[Float64Array, Float64Array]:
    """``values`` rounded to the nearest of a type of ``bits`` precision whose normal numbers
    start at ``2^emin`` (no overflow: a cell's a and b are near its magnitude), and its spacing
    there.

    >>> grid(np.array([1 + 2**-9, 1 + 2**-7, 3e-40]), 8, -126)[0].tolist()
    [1.0, 1.0078125, 2.7550648847397363e-40]
    """
    _, exponent = np.frexp(values)
    spacing = np.ldexp(1.0, np.maximum(exponent - 1, emin) - bits + 1)
    rounded: Float64Array = np.round(values / spacing) * spacing
    return rounded, spacing
