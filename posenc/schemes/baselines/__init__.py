"""``index``, ``normalized`` and ``binary``: the teaching baselines, three schemes sharing one
parameter (``d_model``) and one shape."""

from __future__ import annotations

from typing import Any

from posenc import adapters
from posenc.declare import Scheme
from posenc.schemes.baselines import maths, verify


def _last_position(params: Any, first: int, last: int, component: str) -> float:
    return float(last)


def _declaration(name: str, summary: str, encode: Any, magnitude: Any) -> Scheme:
    return Scheme(
        name,
        summary,
        maths.BaselineParams,
        maths.shape,
        encode,
        maths.cost,
        verify.verify_baseline,
        verify.verify_baseline_cost,
        examples=({"d_model": 5},),
        vectors=adapters.rows_of(encode),
        conformance=adapters.conformance_of(encode),
        conformance_cost=adapters.conformance_cost_of(maths.cost),
        magnitude=magnitude,
    )


index = _declaration(
    "index", "teaching baseline: the position in every column", maths.index, _last_position
)
normalized = _declaration(
    "normalized",
    "teaching baseline: position / largest position",
    maths.normalized,
    adapters.unit,
)
binary = _declaration(
    "binary", "teaching baseline: bit j of the position in column j", maths.binary, adapters.unit
)
