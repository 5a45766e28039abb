"""What the /verify reports of several schemes share: chunking, and the relative map.

Tolerances use ``u``, the unit roundoff of the served dtype (see
:mod:`posenc.schemes.sinusoidal.verify` for the reasoning): a value within ``u·|v|`` of the exact
one, identities over ``m`` terms within about ``m·u``. Every check states its work in its docstring
and runs in chunks of rows (:func:`posenc.verify.row_chunks`), so that a cancelled verify stops
within one chunk; next to each scheme's ``verify_*`` is its ``verify_*_cost(params, n)``: the bytes
it holds at its peak, the served array included (counted at 8 bytes a value), and its work in units
of ~1 ns, calibrated by ``python -m bench.verify_worst``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.verify import (
    CHUNK_ELEMENTS,
    Check,
    row_chunks,
)

FloatArray = npt.NDArray[np.floating]
ARITHMETIC = 2.0**-50
# Work of one chunk-sized matrix product in the relative map: a few milliseconds.
PRODUCT_WORK = 2**22
# Directions of the table weaker than this share of the strongest one (in the squared
# singular values of the Gram matrix) count as rounding noise, not as part of its span.
RANK_RCOND = 1e-10
# README's bound for float32 and float16 values: half an ulp plus 2^-14.
ROUNDED_ULPS = 0.5 + 2.0**-14
# Fixed overhead of any report: Decimal work, frequency caches, the report's own objects.
FIXED_BYTES = 1_000_000


def chunk_values(values: int, width: int) -> int:
    """Values in one chunk of rows of ``width``: what a chunk-sized temporary holds."""
    return min(values, CHUNK_ELEMENTS + width)


def is_consecutive(positions: npt.NDArray[np.int64]) -> None:
    if len(positions) > 1 and not np.all(np.diff(positions) == 1):
        raise ValueError("verify checks tables of consecutive positions")


def relative_map(table: FloatArray) -> Check:
    """Is there one matrix ``M`` with ``PE(p+1) = M·PE(p)`` for every p? Least squares says.

    With ``A`` the rows before and ``B`` the rows after, the best map is ``M = A⁺B``, found
    through the Gram matrix of the smaller side (r = min(n−1, d)): ``AᵀA`` (d × d) when
    ``d < n``, else ``AAᵀ`` ((n−1) × (n−1)), accumulated chunk by chunk, then one r × r
    decomposition; the residual ``max|A·A⁺B − B|`` is then measured on every value.
    O(n·d·r + r³) work, O(r² + r·d) memory beyond the table.
    """
    n, d = table.shape
    if n < 3:
        return Check(
            "relative_rotation",
            True,
            "max_abs_residual",
            0.0,
            0.0,
            "does not apply: fewer than three rows, and any two rows are related by some matrix",
        )
    m = n - 1
    residual = 0.0
    if d <= m:
        gram, cross = np.zeros((d, d)), np.zeros((d, d))
        for block in row_chunks(m, max(d * d // 64, d)):
            a = table[block].astype(np.float64)
            b = table[block.start + 1 : block.stop + 1].astype(np.float64)
            gram += a.T @ a
            cross += a.T @ b
        checkpoint()
        solution = np.linalg.lstsq(gram, cross, rcond=RANK_RCOND)[0]
        for block in row_chunks(m, max(d * d // 64, d)):
            a = table[block].astype(np.float64)
            b = table[block.start + 1 : block.stop + 1].astype(np.float64)
            residual = max(residual, float(np.max(np.abs(a @ solution - b))))
    else:
        gram = np.zeros((m, m))
        columns = max(1, PRODUCT_WORK // (m * m))
        for first in range(0, d, columns):
            checkpoint()
            a = table[:m, first : first + columns].astype(np.float64)
            gram += a @ a.T
        checkpoint()
        # A·A⁺ = G·G⁺ with G = AAᵀ: the projection onto the span of A's columns.
        projection = gram @ np.linalg.pinv(gram, rcond=RANK_RCOND, hermitian=True)
        for first in range(0, d, columns):
            checkpoint()
            b = table[1:, first : first + columns].astype(np.float64)
            residual = max(residual, float(np.max(np.abs(projection @ b - b))))
    scale = 1.0
    for block in row_chunks(n, d):
        scale = max(scale, float(np.max(np.abs(table[block]))))
    tolerance = 1e-6 * scale
    return Check(
        "relative_rotation",
        residual <= tolerance,
        "max_abs_residual",
        residual,
        tolerance,
        "one linear map takes the encoding of every position to that of the next (best "
        "least-squares map, its largest residual over every value)",
    )


def relative_map_cost(n: int, d: int) -> Cost:
    if n < 3:
        return Cost(0, 0)
    r = min(n - 1, d)
    # Two products over every value against an r-wide side, and one r × r decomposition
    # (an SVD or eigendecomposition: ~100·r³ flops at worst, LAPACK's workspace included).
    return Cost(
        8 * (4 * r * r + 4 * chunk_values(n * d, d) + r * min(d, PRODUCT_WORK)),
        20 * n * d * r + 60 * r**3 + 30 * n * d,
    )
