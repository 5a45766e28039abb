"""Measured properties of a served table: the report types and the measurements schemes share.

A :class:`Check` is a property that must hold (its failure is a defect or a real limit of the
parameters); a :class:`Statistic` is a descriptive figure. Every number is measured on the array
handed in, never assumed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import FREE, Cost
from posenc.numerics.exact import decimal_pi

StatisticValue = float | int | list[int] | None

# Values per working chunk (2 MiB of float64): a few milliseconds of vectorised work.
CHUNK_ELEMENTS = 2**18
# Shifts k that the relative-position checks visit, each over every position.
MAX_SHIFTS = 64
# Element operations spent on an exact pairwise figure before it is banded or sampled.
PAIR_WORK = 2**24
# At most this many shifts for the pairwise band: each costs ~30 µs of Python.
MAX_BAND = 1024
# At most this many pairs in the cosine sample: ±0.0053 at δ = 10^-6.
MAX_SAMPLE = 2**18


@dataclass(frozen=True)
class Check:
    """``holds`` is None when the property cannot apply to the parameters (``detail`` says why):
    never True for a property that was not measured."""

    name: str
    holds: bool | None
    statistic: str
    value: float | None
    tolerance: float
    detail: str


def inapplicable(name: str, statistic: str, tolerance: float, why: str) -> Check:
    """A check that cannot apply to these parameters, and the reason."""
    return Check(name, None, statistic, None, tolerance, f"does not apply: {why}")


@dataclass(frozen=True)
class Statistic:
    name: str
    value: StatisticValue
    detail: str


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    statistics: tuple[Statistic, ...]

    @property
    def passed(self) -> bool:
        return all(check.holds is not False for check in self.checks)


def unit_roundoff(dtype: npt.DTypeLike) -> float:
    """Half the spacing of ``dtype`` at 1: the largest relative error of one rounding.

    >>> unit_roundoff("float32") == 2.0**-24
    True
    """
    return float(np.finfo(dtype).eps) / 2


def row_to_row_angles(sin: npt.ArrayLike, cos: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The angle each (sin, cos) pair turns from one row to the next: ``(n-1, pairs)``.

    >>> row_to_row_angles([[0.0], [1.0]], [[1.0], [0.0]]).round(4).tolist()
    [[1.5708]]
    """
    s, c = np.asarray(sin, dtype=np.float64), np.asarray(cos, dtype=np.float64)
    return np.arctan2(s[1:] * c[:-1] - c[1:] * s[:-1], c[1:] * c[:-1] + s[1:] * s[:-1])


def bounded(table: npt.NDArray[np.floating]) -> Check:
    """Every value in [-1, 1]: O(n·d), by chunks of rows."""
    largest = 0.0
    for block in row_chunks(len(table), int(np.prod(table.shape[1:]))):
        if table[block].size:
            largest = max(largest, float(np.max(np.abs(table[block]))))
    return Check(
        "bounded",
        largest <= 1.0,
        "max_abs_value",
        largest,
        1.0,
        "every value of the table lies in [-1, 1]",
    )


def row_chunks(n: int, width: int, start: int = 0) -> Iterator[slice]:
    """Slices of rows ``start … n-1`` holding about :data:`CHUNK_ELEMENTS` values each.

    Each chunk is a bounded piece of work (a few milliseconds), and the cancel token is
    consulted before each: a verify stops within one chunk once its answer is not wanted.

    >>> [(s.start, s.stop) for s in row_chunks(5, CHUNK_ELEMENTS // 2)]
    [(0, 2), (2, 4), (4, 5)]
    """
    rows = max(1, CHUNK_ELEMENTS // max(width, 1))
    for first in range(start, n, rows):
        checkpoint()
        yield slice(first, min(first + rows, n))


def shifts(n: int) -> npt.NDArray[np.int64]:
    """Every shift 1 … n-1 for short tables, else :data:`MAX_SHIFTS` spread geometrically.

    >>> shifts(4).tolist(), len(shifts(10**6)) <= MAX_SHIFTS, int(shifts(10**6)[-1])
    ([1, 2, 3], True, 999999)
    """
    if n - 1 <= MAX_SHIFTS:
        return np.arange(1, n, dtype=np.int64)
    return np.unique(np.geomspace(1, n - 1, MAX_SHIFTS).round().astype(np.int64))


def duplicate_rows(
    rows: npt.NDArray[np.floating],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Every row equal by value (−0 equals +0) to an earlier one, and the first row it equals.

    Returns ``(earlier, later)`` index arrays, ordered by ``later``. O(n·d) work and O(n)
    memory beyond a chunk: each row gets a 64-bit hash of its values' bits (each value's bits
    mixed with a random odd weight, then summed, in wrapping integer arithmetic: exact and
    order-free, so equal rows hash equally); each row is then compared value by value with the
    first row of its hash. If two distinct rows ever share a hash (odds ~ n²·2^-64), the rows
    are compared exactly by sorting instead.

    >>> duplicate_rows(np.array([[1.0, 0.0], [2.0, 1.0], [1.0, -0.0], [2.0, 1.0]]))
    (array([0, 1]), array([2, 3]))
    """
    n, d = rows.shape
    none = np.zeros(0, dtype=np.intp)
    if n < 2:
        return none, none
    weights = np.random.default_rng(0).integers(0, 2**63, size=d, dtype=np.uint64) * 2 + 1
    keys = np.empty(n, dtype=np.uint64)
    for block in row_chunks(n, d):
        # + 0.0 turns −0 into +0, so that rows equal by value have equal bits.
        bits = (rows[block].astype(np.float64) + 0.0).view(np.uint64)
        # Fold the high bits down first: a float32 value's low 29 bits are zero in float64.
        bits ^= bits >> np.uint64(29)
        bits *= weights
        bits ^= bits >> np.uint64(32)
        keys[block] = bits.sum(axis=1, dtype=np.uint64)
    order = np.argsort(keys, kind="stable")  # stable: a hash's first row comes first
    sorted_keys = keys[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = sorted_keys[1:] != sorted_keys[:-1]
    head = order[np.maximum.accumulate(np.where(starts, np.arange(n), 0))]
    candidates = np.flatnonzero(~starts)
    equal = np.empty(len(candidates), dtype=bool)
    step = max(1, CHUNK_ELEMENTS // d)
    for first in range(0, len(candidates), step):
        checkpoint()
        at = candidates[first : first + step]
        equal[first : first + step] = np.all(rows[order[at]] == rows[head[at]], axis=1)
    if equal.all():
        later = order[candidates]
        by_later = np.argsort(later)
        return head[candidates][by_later], later[by_later]
    _, first_seen, inverse = np.unique(
        rows.astype(np.float64) + 0.0, axis=0, return_index=True, return_inverse=True
    )
    earlier = first_seen[inverse.ravel()]
    later = np.flatnonzero(earlier != np.arange(n))
    return earlier[later], later


def repeated_rows(rows: npt.NDArray[np.floating]) -> tuple[int, tuple[int, int] | None]:
    """How many rows equal an earlier one, and the first such pair: see :func:`duplicate_rows`.

    >>> repeated_rows(np.array([[1.0, 0.0], [2.0, 1.0], [1.0, -0.0]]))
    (1, (0, 2))
    """
    earlier, later = duplicate_rows(rows)
    if not len(later):
        return 0, None
    return len(later), (int(earlier[0]), int(later[0]))


@dataclass(frozen=True)
class PairwiseFigures:
    """Repeated rows, the closest rows and the mean |cosine| between distinct rows of a table.

    Work and memory are bounded whatever the table's size:

    - ``repeated`` is exact: :func:`repeated_rows`, O(n·d);
    - the smallest distance is exact (every pair, its difference summed directly) when the
      n(n−1)/2 pairs cost at most :data:`PAIR_WORK` element operations (and n ≤ MAX_BAND + 1);
      otherwise it is taken over every pair within ``band`` (≤ :data:`MAX_BAND`) positions of
      each other — an upper bound of the minimum, and the detail says so. Repeated rows make
      it exactly 0. O(min(n²·d, PAIR_WORK));
    - the mean |cosine| is exact under the same condition; otherwise it is the mean over ``m``
      pairs drawn uniformly (seeded) from the distinct pairs, which by Hoeffding's inequality
      lies within ``sqrt(ln(2/δ) / 2m)`` of the exact mean with probability ``1 − δ``,
      ``δ = 10^-6``; ``m = max(1024, min(MAX_SAMPLE, PAIR_WORK / d))``.
      O(min(n²·d, PAIR_WORK + 1024·d)).
    """

    repeated: int | None
    min_distance: float | None
    closest_pair: list[int] | None
    band: int | None
    mean_abs_cosine: float | None
    cosine_error: float

    @classmethod
    def of(
        cls, rows: npt.NDArray[np.floating], positions: npt.NDArray[np.int64]
    ) -> PairwiseFigures:
        n, d = rows.shape
        if n < 2:
            return cls(None, None, None, None, None, 0.0)
        repeated, pair = repeated_rows(rows)
        exact, band = _band(n, d)
        distance, closest, abs_cosines = _banded(rows, band, exact)
        if pair is not None:
            distance, closest = 0.0, pair
        if exact:
            mean, error = abs_cosines / (n * (n - 1) // 2), 0.0
        else:
            mean, error = _sampled_abs_cosine(rows)
        positions_of = sorted([int(positions[closest[0]]), int(positions[closest[1]])])
        return cls(repeated, distance, positions_of, None if exact else band, mean, error)

    def unique_positions(self) -> Check:
        if self.repeated is None:
            return inapplicable(
                "unique_positions", "repeated_rows", 0.0, "a single row has no pairs"
            )
        return Check(
            "unique_positions",
            self.repeated == 0,
            "repeated_rows",
            float(self.repeated),
            0.0,
            "no two positions of the table share an encoding: every row compared by value "
            "with every other (hashed, then equal hashes compared exactly)",
        )

    def statistics(self) -> list[Statistic]:
        if self.band is None:
            over, cosine_over = "over all pairs", "over all pairs"
        else:
            over = (
                f"over the pairs within {self.band} positions of each other (an upper bound of "
                "the minimum over all pairs; exactly 0 when rows repeat)"
            )
            cosine_over = (
                f"estimated from a seeded uniform sample of pairs: within ±{self.cosine_error:.2g}"
                " of the exact mean with probability 1 − 10^-6 (Hoeffding)"
            )
        return [
            Statistic(
                "mean_abs_cosine_distinct",
                self.mean_abs_cosine,
                f"mean |cos| between the encodings of distinct positions, {cosine_over}",
            ),
            Statistic(
                "min_pairwise_distance",
                self.min_distance,
                f"smallest Euclidean distance between two rows, {over}",
            ),
            Statistic("closest_pair", self.closest_pair, "the two positions at that distance"),
        ]


def _band(n: int, d: int) -> tuple[bool, int]:
    """Is every pair visited (and so exact), and the largest ``k`` of the pairs ``(a, a+k)``."""
    if n - 1 <= MAX_BAND and n * (n - 1) // 2 * d <= PAIR_WORK:
        return True, n - 1
    return False, int(min(n - 1, MAX_BAND, max(1, PAIR_WORK // (n * d))))


def _banded(
    rows: npt.NDArray[np.floating], band: int, cosines: bool
) -> tuple[float, tuple[int, int], float]:
    """Smallest distance over pairs ``(a, a+k)``, ``1 ≤ k ≤ band``, and Σ|cos| if asked."""
    n, d = rows.shape
    best, where, total = math.inf, (0, 1), 0.0
    for k in range(1, band + 1):
        for block in row_chunks(n - k, d):
            a = rows[block].astype(np.float64)
            b = rows[block.start + k : block.stop + k].astype(np.float64)
            diff = a - b
            squared = np.einsum("ij,ij->i", diff, diff)
            at = int(np.argmin(squared))
            if squared[at] < best:
                best, where = float(squared[at]), (block.start + at, block.start + at + k)
            if cosines:
                norms = np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
                dots = np.einsum("ij,ij->i", a, b)
                # A zero vector has no direction; its cosine counts as 0 (as in similarity).
                total += float(np.sum(np.abs(dots[norms > 0] / norms[norms > 0]).clip(0, 1)))
    return math.sqrt(best), where, total


def _sampled_abs_cosine(rows: npt.NDArray[np.floating]) -> tuple[float, float]:
    n, d = rows.shape
    m = max(1024, min(MAX_SAMPLE, PAIR_WORK // d))
    rng = np.random.default_rng(0)
    first = rng.integers(0, n, m)
    second = rng.integers(0, n - 1, m)
    second += second >= first  # uniform over ordered pairs of distinct rows
    total = 0.0
    step = max(1, CHUNK_ELEMENTS // d)
    for start in range(0, m, step):
        checkpoint()
        a = rows[first[start : start + step]].astype(np.float64)
        b = rows[second[start : start + step]].astype(np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
        dots = np.einsum("ij,ij->i", a, b)
        total += float(np.sum(np.abs(dots[norms > 0] / norms[norms > 0]).clip(0, 1)))
    return total / m, math.sqrt(math.log(2 / 1e-6) / (2 * m))


def pairwise_cost(n: int, d: int) -> Cost:
    """What :meth:`PairwiseFigures.of` costs for an ``(n, d)`` table (beyond the table)."""
    if n < 2:
        return FREE
    exact, band = _band(n, d)
    pairs = n * band if not exact else n * (n - 1) // 2
    sampled = 0 if exact else max(1024, min(MAX_SAMPLE, PAIR_WORK // d))
    chunk = min(n * d, CHUNK_ELEMENTS + d)
    # Hashing: ~10 passes over the table and a sort of n keys; keys, order, candidates.
    hashing = Cost(32 * n + 4 * 8 * chunk, 10 * n * d + 150 * n)
    # The band: ~12 passes over the pair's two rows, ~30 µs of Python per chunk.
    banded = Cost(6 * 8 * chunk, 12 * pairs * d + 30_000 * (band + pairs * d // CHUNK_ELEMENTS))
    sample = Cost(16 * sampled + 6 * 8 * min(sampled * d, CHUNK_ELEMENTS + d), 20 * sampled * d)
    return hashing.peak(banded).peak(sample)


def ulp_error(served: npt.NDArray[np.floating], exact: Sequence[Decimal]) -> float:
    """Largest ``|served − exact|`` in units of the last place of ``served``'s dtype at ``exact``.

    >>> ulp_error(np.array([1.0], dtype=np.float32), [Decimal(1) + Decimal(2) ** -24])
    0.5
    """
    info = np.finfo(served.dtype)
    digits = info.nmant + 1
    smallest = 2.0 ** (info.minexp - digits + 1)
    worst = 0.0
    for value, truth in zip(served.tolist(), exact, strict=True):
        _, exponent = math.frexp(float(truth))
        ulp = max(2.0 ** (exponent - digits), smallest)
        worst = max(worst, float(abs(Decimal(value) - truth)) / ulp)
    return worst


def decimal_sin_cos(angle: Decimal, digits: int = 50) -> tuple[Decimal, Decimal]:
    """``sin`` and ``cos`` of ``angle`` by Taylor series at ``digits`` digits, after reduction.

    An independent reference for the float paths: it shares no code with :mod:`.numerics.exact`
    but the value of π.

    >>> [round(float(v), 12) for v in decimal_sin_cos(Decimal(10) ** 6)]
    [-0.349993502171, 0.936752127533]
    """
    with localcontext(prec=digits + 20):
        two_pi = 2 * decimal_pi()
        x = angle - two_pi * (angle / two_pi).to_integral_value()
        term, total_sin, total_cos, k = x, Decimal(0), Decimal(1), 1
        cos_term = Decimal(1)
        while abs(term) > Decimal(10) ** -(digits + 10) or k < 3:
            total_sin += term
            cos_term = -cos_term * x * x / ((k + 1) * k)
            total_cos += cos_term
            term = -term * x * x / ((k + 1) * (k + 2))
            k += 2
        return +total_sin, +total_cos
