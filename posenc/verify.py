"""Measured properties of a served table: the report types and the measurements schemes share.

A :class:`Check` is a property that must hold (its failure is a defect or a real limit of the
parameters); a :class:`Statistic` is a descriptive figure. Every number is measured on the array
handed in, never assumed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np
import numpy.typing as npt

from posenc import similarity
from posenc.exact import decimal_pi

StatisticValue = float | int | list[int] | None


@dataclass(frozen=True)
class Check:
    name: str
    holds: bool
    statistic: str
    value: float | None
    tolerance: float
    detail: str


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
        return all(check.holds for check in self.checks)


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
    largest = float(np.max(np.abs(table))) if table.size else 0.0
    return Check(
        "bounded",
        largest <= 1.0,
        "max_abs_value",
        largest,
        1.0,
        "every value of the table lies in [-1, 1]",
    )


@dataclass(frozen=True)
class PairwiseFigures:
    """Distances and cosines between the distinct rows of a table."""

    min_distance: float | None
    closest_pair: list[int] | None
    mean_abs_cosine: float | None

    @classmethod
    def of(
        cls, rows: npt.NDArray[np.floating], positions: npt.NDArray[np.int64]
    ) -> PairwiseFigures:
        n = len(rows)
        if n < 2:
            return cls(None, None, None)
        distances = similarity.matrix(rows, "euclidean")
        np.fill_diagonal(distances, np.inf)
        a, b = np.unravel_index(int(np.argmin(distances)), distances.shape)
        cosines = np.abs(similarity.matrix(rows, "cosine"))
        off_diagonal = (cosines.sum() - np.trace(cosines)) / (n * (n - 1))
        pair = sorted([int(positions[a]), int(positions[b])])
        return cls(float(distances[a, b]), pair, float(off_diagonal))

    def unique_positions(self) -> Check:
        distance = self.min_distance
        return Check(
            "unique_positions",
            distance is None or distance > 0.0,
            "min_pairwise_distance",
            distance,
            0.0,
            "no two positions of the table share an encoding (smallest Euclidean distance > 0)"
            + ("; a single row has no pairs" if distance is None else ""),
        )

    def statistics(self) -> list[Statistic]:
        return [
            Statistic(
                "mean_abs_cosine_distinct",
                self.mean_abs_cosine,
                "mean |cos| between the encodings of distinct positions",
            ),
            Statistic(
                "min_pairwise_distance",
                self.min_distance,
                "smallest Euclidean distance between two rows",
            ),
            Statistic("closest_pair", self.closest_pair, "the two positions at that distance"),
        ]


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

    An independent reference for the float paths: it shares no code with :mod:`posenc.exact`
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
