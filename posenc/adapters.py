"""Pieces of a declaration that several schemes share, so that no scheme copies another's.

A :class:`~posenc.declare.Scheme` takes callables with one signature for every scheme; these
build them from a scheme's own functions: the float64 rows /similarity compares, the comparison
of a client's array with the exact one (:func:`posenc.conformance.check_any`) and its cost, and
the magnitude bounds of arrays whose values are bounded by construction.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from posenc.conformance import Conformance, check_any, row_axis
from posenc.cost import Cost


def rows_of(encode: Any) -> Any:
    """The per-position vectors that /similarity compares: the float64 rows of the table."""
    return lambda params, positions, vector: encode(params, positions, "float64", "")


def conformance_of(encode: Any) -> Any:
    """The comparison every scheme can make: errors against the exact array, repeated rows,
    rounding (:func:`posenc.conformance.check_any`)."""

    def check(
        params: Any, array: npt.NDArray[Any], component: str, offset: int, tolerance: float
    ) -> Conformance:
        axis = row_axis(array.ndim)
        count = int(array.shape[0] if axis is None else array.shape[axis])
        return check_any(
            lambda positions: encode(params, positions, "float64", component),
            array,
            offset,
            count,
            tolerance,
        )

    return check


def conformance_cost_of(cost: Any) -> Any:
    """The client's array, the exact one in float64 and a few float64 passes over them."""

    def conformance_cost(params: Any, count: int, component: str) -> Cost:
        computing: Cost = cost(params, count, "float64", component)
        return computing + Cost(computing.bytes * 4, computing.work * 2)

    return conformance_cost


def unit(params: Any, first: int, last: int, component: str) -> float:
    """The magnitude of values within [-1, 1]: sines, cosines, bits, fractions."""
    return 1.0
