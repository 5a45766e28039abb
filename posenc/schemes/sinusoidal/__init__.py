"""``sinusoidal``: Vaswani et al. 2017, and the tables of tensor2tensor and fairseq."""

from __future__ import annotations

from typing import Any, cast

import numpy.typing as npt

from posenc import adapters
from posenc.conformance import Conformance
from posenc.cost import Cost
from posenc.declare import Positions, Scheme
from posenc.numerics import costs
from posenc.schemes.sinusoidal import conformance, maths, verify
from posenc.schemes.sinusoidal.params import DType, SinusoidalParams


def _encode(params: Any, positions: Positions, dtype: str, component: str) -> Any:
    return maths.encode(params, positions, cast(DType, dtype))


def _table(
    params: Any, count: int, offset: int, dtype: str, component: str, finished: Any = None
) -> Any:
    return maths.table(params, count, offset, cast(DType, dtype), finished=finished)


def _conformance(
    params: Any, array: npt.NDArray[Any], component: str, offset: int, tolerance: float
) -> Conformance:
    # The paper's exact table has faults worth naming; any other is compared, value by value.
    if params.convention == "vaswani" and params.recipe == "exact":
        return conformance.check(params, array, offset, tolerance)
    compared: Conformance = adapters.conformance_of(_encode)(
        params, array, component, offset, tolerance
    )
    return compared


def _conformance_cost(params: Any, count: int, component: str) -> Cost:
    diagnosed = conformance.conformance_cost(params, count, params.d_model)
    compared: Cost = adapters.conformance_cost_of(maths.cost)(params, count, component)
    return costs.larger(diagnosed, compared)


declaration = Scheme(
    "sinusoidal",
    "Vaswani et al. 2017: sin/cos of pos·base^(-2i/d_model), correctly rounded; or the "
    "tables of tensor2tensor and fairseq",
    SinusoidalParams,
    lambda p, n, c: (n, p.d_model),
    _encode,
    maths.cost,
    verify.verify,
    verify.verify_cost,
    examples=(
        {"d_model": 8},
        {"d_model": 7, "layout": "split", "base": 100.0},
        {"d_model": 6, "convention": "tensor2tensor"},
        {"d_model": 6, "convention": "fairseq"},
        {"d_model": 8, "recipe": "framework"},
    ),
    table=_table,
    vectors=adapters.rows_of(_encode),
    conformance=_conformance,
    conformance_cost=_conformance_cost,
    magnitude=adapters.unit,
)
