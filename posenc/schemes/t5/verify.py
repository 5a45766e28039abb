"""The /verify report of T5's relative buckets.

See :mod:`posenc.checks` for the tolerances and the costs beside each check.
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from posenc.checks import (
    FIXED_BYTES,
    chunk_values,
    is_consecutive,
)
from posenc.cost import Cost
from posenc.schemes.t5 import maths as t5
from posenc.verify import (
    Check,
    Report,
    Statistic,
    inapplicable,
    row_chunks,
)


def verify_t5(
    params: t5.T5Params, served: npt.NDArray[np.integer], positions: npt.NDArray[np.int64]
) -> Report:
    """Bucket range, relative-only buckets and the buckets used (O(n²), by chunks of rows),
    monotone and direction (O(n)), on the ``(n, n)`` buckets of consecutive positions."""
    is_consecutive(positions)
    n = len(positions)
    # The bucket of each j − i = r, read off the first row (r ≥ 0) and column (r ≤ 0).
    reference = np.concatenate([served[::-1, 0], served[0, 1:]]).astype(np.int64)
    mixed = np.zeros(2 * n - 1, dtype=bool)
    low, high = int(reference.min()), int(reference.max())
    for rows in row_chunks(n, n):
        relative = np.arange(n)[None, :] - np.arange(rows.start, rows.stop)[:, None] + n - 1
        part = served[rows]
        low, high = min(low, int(part.min())), max(high, int(part.max()))
        mixed[relative[part != reference[relative]]] = True
    in_range = 0 <= low and high < params.num_buckets
    checks = [
        Check(
            "bucket_range",
            in_range,
            "max_bucket",
            float(high),
            float(params.num_buckets - 1),
            f"every bucket lies in [0, {params.num_buckets})",
        ),
        Check(
            "relative_only",
            not mixed.any(),
            "relative_positions_with_several_buckets",
            float(mixed.sum()),
            0.0,
            "the bucket depends on j − i alone: every value equals the first row's (j ≥ i) or "
            "first column's (j < i) value at the same j − i",
        ),
    ]
    by_relative = {r - (n - 1): int(b) for r, b in enumerate(reference.tolist())}
    backwards = [by_relative[r] for r in sorted(by_relative) if r <= 0][::-1]
    forwards = [by_relative[r] for r in sorted(by_relative) if r >= 0]
    falls = sum(int(b < a) for part in (backwards, forwards) for a, b in itertools.pairwise(part))
    checks.append(
        Check(
            "monotone",
            falls == 0,
            "decreases",
            float(falls),
            0.0,
            "moving away from i, in either direction, the bucket never goes back",
        )
    )
    checks.append(_t5_direction(params, by_relative, n))
    return Report(
        tuple(checks),
        (
            Statistic(
                "buckets_used",
                _buckets_used(served, in_range, params),
                "distinct buckets in the table",
            ),
        ),
    )


def _buckets_used(served: npt.NDArray[np.integer], in_range: bool, params: t5.T5Params) -> int:
    """Distinct values: counted per chunk of rows (O(n²); sorted only when out of range)."""
    seen = np.zeros(params.num_buckets, dtype=bool)
    others: set[int] = set()
    for rows in row_chunks(len(served), served.shape[1]):
        part = served[rows].ravel()
        if in_range:
            seen |= np.bincount(part, minlength=params.num_buckets).astype(bool)
        else:
            others.update(np.unique(part).tolist())
    return int(seen.sum()) + len(others)


def verify_t5_cost(params: t5.T5Params, n: int) -> Cost:
    values = n * n
    chunk = chunk_values(values, n)
    return Cost(
        8 * values + 6 * 8 * chunk + 64 * n + 4 * params.num_buckets + FIXED_BYTES,
        40 * values + 1_000_000 + 2_000 * n,
    )


def _t5_direction(params: t5.T5Params, by_relative: dict[int, int], n: int) -> Check:
    if params.bidirectional:
        half = params.num_buckets // 2
        pairs = [(r, -r) for r in by_relative if r > 0 and -r in by_relative]
        off = sum(int(by_relative[r] != by_relative[m] + half) for r, m in pairs)
        if n < 2:
            return inapplicable("symmetric", "mismatches", 0.0, "one position has no r > 0")
        return Check(
            "symmetric",
            off == 0,
            "mismatches",
            float(off),
            0.0,
            f"bucket(r) = bucket(−r) + {half} for r > 0: the same scale both ways",
        )
    future = [b for r, b in by_relative.items() if r > 0]
    off = sum(int(b != 0) for b in future)
    if n < 2:
        return inapplicable(
            "causal", "future_positions_not_in_bucket_0", 0.0, "one position has no later one"
        )
    return Check(
        "causal",
        off == 0,
        "future_positions_not_in_bucket_0",
        float(off),
        0.0,
        "unidirectional: every later position j > i falls in bucket 0",
    )
