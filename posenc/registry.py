"""The registry: every scheme's declaration (:class:`posenc.declare.Scheme`), one entry each.

This is the only list of schemes. Everything else — the HTTP operations, ``/v1/schemes``, the
OpenAPI document, the page's controls, the contract tests — is derived from these entries, so
adding a scheme is its module and one entry here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Conformance, check_any, row_axis
from posenc.cost import Cost
from posenc.declare import Extra, Limits, Positions, Scheme
from posenc.errors import InconsistentError, ParameterError
from posenc.numerics import costs
from posenc.schemes.alibi import maths as alibi
from posenc.schemes.alibi import verify as alibi_verify
from posenc.schemes.baselines import maths as baselines
from posenc.schemes.baselines import verify as baselines_verify
from posenc.schemes.grid import maths as grid
from posenc.schemes.grid import verify as grid_verify
from posenc.schemes.rope import config as rope_config
from posenc.schemes.rope import conformance as rope_conformance
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope import verify as rope_verify
from posenc.schemes.rope.params import COMPONENTS, RopeParams
from posenc.schemes.sinusoidal import conformance as sinusoidal_conformance
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal import verify as sinusoidal_verify
from posenc.schemes.sinusoidal.params import SinusoidalParams
from posenc.schemes.t5 import maths as t5
from posenc.schemes.t5 import verify as t5_verify


def _rows_of(encode: Any) -> Any:
    """The per-position vectors that /similarity compares: the float64 rows of the table."""
    return lambda params, positions, vector: encode(params, positions, "float64", "")


def conformance_of(encode: Any) -> Any:
    """The comparison every scheme can make: errors against the exact array, repeated rows,
    rounding (:func:`posenc.conformance.check_any`)."""

    def check(
        params: Any, array: npt.NDArray[Any], component: str, offset: int, tolerance: float
    ) -> Conformance:
        count = _count(array, component)
        return check_any(
            lambda positions: encode(params, positions, "float64", component),
            array,
            offset,
            count,
            tolerance,
        )

    return check


def _count(array: npt.NDArray[Any], component: str) -> int:
    axis = row_axis(array.ndim)
    return int(array.shape[0] if axis is None else array.shape[axis])


def conformance_cost_of(cost: Any) -> Any:
    """The client's array, the exact one in float64 and a few float64 passes over them."""

    def conformance_cost(params: Any, count: int, component: str) -> Cost:
        computing: Cost = cost(params, count, "float64", component)
        return computing + Cost(computing.bytes * 4, computing.work * 2)

    return conformance_cost


# --- sinusoidal ---------------------------------------------------------------------------


def _sinusoidal_encode(params: Any, positions: Positions, dtype: str, component: str) -> Any:
    return sinusoidal.encode(params, positions, dtype)  # type: ignore[arg-type]


def _sinusoidal_table(params: Any, count: int, offset: int, dtype: str, component: str) -> Any:
    return sinusoidal.table(params, count, offset, dtype)  # type: ignore[arg-type]


def _sinusoidal_conformance(
    params: Any, array: npt.NDArray[Any], component: str, offset: int, tolerance: float
) -> Conformance:
    if params.convention == "vaswani" and params.recipe == "exact":
        return sinusoidal_conformance.check(params, array, offset, tolerance)
    generic: Conformance = conformance_of(_sinusoidal_encode)(
        params, array, component, offset, tolerance
    )
    return generic


def _sinusoidal_conformance_cost(params: Any, count: int, component: str) -> Cost:
    diagnosed = sinusoidal_conformance.conformance_cost(params, count, params.d_model)
    compared: Cost = conformance_cost_of(sinusoidal.cost)(params, count, component)
    return costs.larger(diagnosed, compared)


# --- rope ---------------------------------------------------------------------------------


def _rope_vectors(
    params: RopeParams, positions: Positions, vector: tuple[float, ...] | None
) -> npt.NDArray[np.float64]:
    """``R_p u`` for every position: ``u`` given, or the unit vector with equal entries."""
    if vector is None:
        u = np.full(params.d_model, 1.0 / np.sqrt(params.d_model))
    elif len(vector) != params.d_model:
        raise InconsistentError(
            "vector", f"must hold d_model = {params.d_model} numbers, got {len(vector)}"
        )
    else:
        u = np.array(vector, dtype=np.float64)
    return rope.rotate(params, np.tile(u, (len(positions), 1)), positions)


def _rope_conformance(
    params: Any, array: npt.NDArray[Any], component: str, offset: int, tolerance: float
) -> Conformance:
    # Its diagnoses read cos/sin caches and angles; frequencies alone are only compared.
    if component == "inv_freq":
        generic: Conformance = conformance_of(rope.encode)(
            params, array, component, offset, tolerance
        )
        return generic
    return rope_conformance.check(params, array, component, offset, tolerance)


def _rope_conformance_cost(params: Any, count: int, component: str) -> Cost:
    if component == "inv_freq":
        generic: Cost = conformance_cost_of(rope.cost)(params, count, component)
        return generic
    return rope_conformance.conformance_cost(params, count, component)


def _rope_servable(limits: Limits) -> Any:
    """The most rows, up to ``wanted``, of a cos/sin table served as ``.npy`` (or of its
    verify) that ``limits`` admit, 0 when not even one row is: the estimate
    ``app/serving.py`` and ``app/handlers.py`` make of those requests, with its values, work
    and bytes held to the limits as ``app/admission.decide`` holds them."""

    def fits(params: RopeParams, n: int, verify: bool) -> bool:
        values = 2 * n * params.d_model
        # The exact table and the framework's: the links offer both.
        framework = dataclasses.replace(params, recipe="framework")
        cost = costs.larger(
            rope.cost(params, n, "float32", "cos_sin"),
            rope.cost(framework, n, "float32", "cos_sin"),
        )
        # verify adds its checks; a table its serialisation (a header, then a view).
        cost = cost + (rope_verify.verify_rope_cost(params, n) if verify else Cost(2**16, values))
        return (
            values <= limits.max_values
            and cost.work <= limits.max_work
            and cost.bytes <= limits.max_bytes
        )

    def servable(params: RopeParams, wanted: int, verify: bool) -> int:
        if not fits(params, 1, verify):
            return 0
        low, high = 1, wanted  # costs grow with the rows: the largest that fits, by bisection
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(params, middle, verify) else (low, middle - 1)
        return low

    return servable


_ROPE_CONFIG = Extra(
    "config",
    "The rope a model uses, from its config.json: canonical parameters and the URLs of its "
    "table and verify",
    lambda body, limits: rope_config.describe(body, _rope_servable(limits)),
    rope_config.BODY_SCHEMA,
    rope_config.ANSWER_SCHEMA,
)


def _unit(params: Any, first: int, last: int, component: str) -> float:
    """Values within [-1, 1]: sines, cosines, bits, fractions."""
    return 1.0


def _last_position(params: Any, first: int, last: int, component: str) -> float:
    return float(last)


SCHEMES: tuple[Scheme, ...] = (
    Scheme(
        "sinusoidal",
        "Vaswani et al. 2017: sin/cos of pos·base^(-2i/d_model), correctly rounded; or the "
        "tables of tensor2tensor and fairseq",
        SinusoidalParams,
        lambda p, n, c: (n, p.d_model),
        _sinusoidal_encode,
        sinusoidal.cost,
        sinusoidal_verify.verify,
        sinusoidal_verify.verify_cost,
        examples=(
            {"d_model": 8},
            {"d_model": 7, "layout": "split", "base": 100.0},
            {"d_model": 6, "convention": "tensor2tensor"},
            {"d_model": 6, "convention": "fairseq"},
            {"d_model": 8, "recipe": "framework"},
        ),
        table=_sinusoidal_table,
        vectors=_rows_of(_sinusoidal_encode),
        conformance=_sinusoidal_conformance,
        conformance_cost=_sinusoidal_conformance_cost,
        magnitude=_unit,
    ),
    Scheme(
        "rope",
        "RoFormer rotary embedding with the long-context scalings of Hugging Face transformers",
        RopeParams,
        rope.shape,
        rope.encode,
        rope.cost,
        rope_verify.verify_rope,
        rope_verify.verify_rope_cost,
        examples=(
            {"d_model": 8},
            {"d_model": 8, "layout": "interleaved", "base": 500000.0},
            {
                "d_model": 8,
                "scaling": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            {"d_model": 8, "scaling": "llama3", "factor": 8.0},
            {"d_model": 8, "recipe": "framework", "scaling": "linear", "factor": 2.0},
        ),
        table=rope.table,
        vectors=_rope_vectors,
        conformance=_rope_conformance,
        conformance_cost=_rope_conformance_cost,
        components=COMPONENTS,
        rotate=rope.rotate,
        extras=(_ROPE_CONFIG,),
        magnitude=rope.magnitude,
    ),
    Scheme(
        "alibi",
        "Press et al. 2022: a linear bias -m_h·|i − j| per head",
        alibi.AlibiParams,
        alibi.shape,
        alibi.encode,
        alibi.cost,
        alibi_verify.verify_alibi,
        alibi_verify.verify_alibi_cost,
        examples=({"num_heads": 4}, {"num_heads": 6}),
        conformance=conformance_of(alibi.encode),
        conformance_cost=conformance_cost_of(alibi.cost),
        components=alibi.COMPONENTS,
        magnitude=alibi.magnitude,
    ),
    Scheme(
        "t5",
        "Raffel et al. 2020: relative position buckets, int32",
        t5.T5Params,
        t5.shape,
        t5.encode,
        t5.cost,
        t5_verify.verify_t5,
        t5_verify.verify_t5_cost,
        examples=({}, {"num_buckets": 8, "max_distance": 20, "bidirectional": False}),
        conformance=conformance_of(t5.encode),
        conformance_cost=conformance_cost_of(t5.cost),
        dtypes=None,
    ),
    *(
        Scheme(
            f"sinusoidal{k}d",
            f"{k}-D sinusoids for {'images' if k == 2 else 'volumes'}: one block of channels "
            "per axis; rows are grid cells in row-major order",
            grid.Grid2DParams if k == 2 else grid.Grid3DParams,
            grid.shape,
            grid.encode,
            grid.cost,
            grid_verify.verify_grid,
            grid_verify.verify_grid_cost,
            examples=(
                {"d_model": 4 * k, "grid": (3, 2, 2)[:k]},
                {"d_model": 10, "grid": (2, 3, 2)[:k], "convention": "positional-encodings"},
            ),
            vectors=_rows_of(grid.encode),
            conformance=conformance_of(grid.encode),
            conformance_cost=conformance_cost_of(grid.cost),
            rows="grid",
            magnitude=_unit,
        )
        for k in (2, 3)
    ),
    *(
        Scheme(
            name,
            summary,
            baselines.BaselineParams,
            baselines.shape,
            encode,
            baselines.cost,
            baselines_verify.verify_baseline,
            baselines_verify.verify_baseline_cost,
            examples=({"d_model": 5},),
            vectors=_rows_of(encode),
            conformance=conformance_of(encode),
            conformance_cost=conformance_cost_of(baselines.cost),
            magnitude=magnitude,
        )
        for name, summary, encode, magnitude in (
            (
                "index",
                "teaching baseline: the position in every column",
                baselines.index,
                _last_position,
            ),
            (
                "normalized",
                "teaching baseline: position / largest position",
                baselines.normalized,
                _unit,
            ),
            (
                "binary",
                "teaching baseline: bit j of the position in column j",
                baselines.binary,
                _unit,
            ),
        )
    ),
)


# The scheme the older form /v1/{endpoint} (no ?scheme=) has always meant.
DEFAULT = "sinusoidal"


def by_name(schemes: tuple[Scheme, ...] = SCHEMES) -> dict[str, Scheme]:
    return {scheme.name: scheme for scheme in schemes}


def get(name: str, schemes: tuple[Scheme, ...] = SCHEMES) -> Scheme:
    found = by_name(schemes).get(name)
    if found is None:
        known = ", ".join(scheme.name for scheme in schemes)
        raise ParameterError("scheme", f"must be one of {known}, got {name!r}")
    return found
