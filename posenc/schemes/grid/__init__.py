"""``sinusoidal2d`` and ``sinusoidal3d``: one block of sinusoid channels per grid axis.

Two schemes from one package: they differ only in the number of axes.
"""

from __future__ import annotations

from posenc import adapters
from posenc.declare import Scheme
from posenc.schemes.grid import maths, verify


def _declaration(k: int) -> Scheme:
    return Scheme(
        f"sinusoidal{k}d",
        f"{k}-D sinusoids for {'images' if k == 2 else 'volumes'}: one block of channels "
        "per axis; rows are grid cells in row-major order",
        maths.Grid2DParams if k == 2 else maths.Grid3DParams,
        maths.shape,
        maths.encode,
        maths.cost,
        verify.verify_grid,
        verify.verify_grid_cost,
        examples=(
            {"d_model": 4 * k, "grid": (3, 2, 2)[:k]},
            {"d_model": 10, "grid": (2, 3, 2)[:k], "convention": "positional-encodings"},
        ),
        vectors=adapters.rows_of(maths.encode),
        conformance=adapters.conformance_of(maths.encode),
        conformance_cost=adapters.conformance_cost_of(maths.cost),
        rows="grid",
        magnitude=adapters.unit,
    )


sinusoidal2d = _declaration(2)
sinusoidal3d = _declaration(3)
