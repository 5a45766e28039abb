"""The registry of schemes: the only list of them anywhere.

Every scheme has the same shape — a parameters dataclass and the functions below — so neither
this registry nor the HTTP layer branches on a scheme's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc import (
    alibi,
    baselines,
    costs,
    grid,
    rope,
    scheme_checks,
    sinusoidal,
    sinusoidal_verify,
    t5,
)
from posenc.cost import Cost
from posenc.errors import ParameterError
from posenc.verify import Report

Positions = npt.NDArray[np.int64]
FLOAT_DTYPES = ("float32", "float64", "float16")


@dataclass(frozen=True)
class Parameter:
    """One parameter as ``/v1/schemes`` describes it."""

    name: str
    type: str
    default: object
    rule: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Scheme:
    """What the HTTP layer needs of a scheme.

    ``encode(params, positions, dtype, component)`` gives the array for the positions (cells of
    the grid when ``on_grid``); ``shape`` its shape, before anything is computed; ``vectors``
    the float64 per-position vectors that /similarity compares (None: there are none);
    ``cost(params, rows, dtype, component)`` what computing the array costs (:mod:`posenc.costs`);
    ``dtypes`` None means the output is integer and ``dtype`` does not apply.
    """

    name: str
    summary: str
    params_type: type[Any]
    parameters: tuple[Parameter, ...]
    encode: Callable[[Any, Positions, str, str], npt.NDArray[Any]]
    shape: Callable[[Any, int, str], tuple[int, ...]]
    verify: Callable[[Any, npt.NDArray[Any], Positions], Report]
    vectors: Callable[[Any, Positions, tuple[float, ...] | None], npt.NDArray[np.float64]] | None
    cost: Callable[[Any, int, str, str], Cost]
    verify_cost: Callable[[Any, int], Cost]
    components: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = FLOAT_DTYPES
    on_grid: bool = False
    table: Callable[[Any, int, int, str], npt.NDArray[Any]] | None = None
    conformance: bool = False
    # /similarity may take the vector to rotate (rope): ``vector`` is passed to ``vectors``.
    similarity_vector: bool = False


def _rows(
    encode: Callable[[Any, Positions, str, str], npt.NDArray[Any]],
) -> Callable[[Any, Positions, tuple[float, ...] | None], npt.NDArray[np.float64]]:
    return lambda params, positions, vector: encode(params, positions, "float64", "")


def _sinusoidal_encode(params: Any, positions: Positions, dtype: str, component: str) -> Any:
    return sinusoidal.encode(params, positions, dtype)  # type: ignore[arg-type]


def _sinusoidal_table(params: Any, seq_len: int, offset: int, dtype: str) -> Any:
    return sinusoidal.table(params, seq_len, offset, dtype)  # type: ignore[arg-type]


def _rope_vectors(
    params: rope.RopeParams, positions: Positions, vector: tuple[float, ...] | None
) -> npt.NDArray[np.float64]:
    """``R_p u`` for every position: ``u`` given, or the unit vector with equal entries."""
    if vector is None:
        u = np.full(params.d_model, 1.0 / np.sqrt(params.d_model))
    elif len(vector) != params.d_model:
        raise ParameterError(
            "vector", f"must hold d_model = {params.d_model} numbers, got {len(vector)}"
        )
    else:
        u = np.array(vector, dtype=np.float64)
    return rope.rotate(params, np.tile(u, (len(positions), 1)), positions)


def _width(rule: str = "width of the encoding") -> Parameter:
    return Parameter("d_model", "integer", None, rule, 1, 65536)


_BASE = Parameter("base", "number", 10000.0, "1 < base ≤ 1e12", 1, 1e12)
_DTYPE = Parameter(
    "dtype",
    "string",
    "float32",
    "the served type; computed in float64 and rounded once",
    choices=FLOAT_DTYPES,
)
_LAYOUT = Parameter(
    "layout",
    "string",
    "interleaved",
    "interleaved: sin, cos, sin, cos …; split: all sines, then all cosines",
    choices=("interleaved", "split"),
)


_RECIPE = Parameter(
    "recipe",
    "string",
    "exact",
    "exact: correctly rounded; framework: the reference library's float32 computation",
    choices=("exact", "framework"),
)


def _factor(name: str, rule: str, default: object = None) -> Parameter:
    return Parameter(name, "number", default, rule, 0, 1e6)


_SCHEMES = (
    Scheme(
        "sinusoidal",
        "Vaswani et al. 2017: sin/cos of pos·base^(-2i/d_model), correctly rounded; or the "
        "tables of tensor2tensor and fairseq",
        sinusoidal.SinusoidalParams,
        (
            _width("required; odd values are valid"),
            _BASE,
            _LAYOUT,
            _DTYPE,
            Parameter(
                "convention",
                "string",
                "vaswani",
                "whose table",
                choices=("vaswani", "tensor2tensor", "fairseq"),
            ),
            Parameter("padding_idx", "integer", 1, "fairseq only: this row is zero", 0, 2**31 - 1),
            _RECIPE,
        ),
        _sinusoidal_encode,
        lambda p, n, c: (n, p.d_model),
        sinusoidal_verify.verify,
        _rows(_sinusoidal_encode),
        costs.sinusoidal,
        sinusoidal_verify.verify_cost,
        table=_sinusoidal_table,
        conformance=True,
    ),
    Scheme(
        "rope",
        "RoFormer rotary embedding with the long-context scalings of Hugging Face transformers",
        rope.RopeParams,
        (
            _width("the rotated (head) dimension; must be even"),
            _BASE,
            Parameter(
                "layout",
                "string",
                "split",
                "split: pairs (i, i+d/2), rotate_half; interleaved: pairs (2i, 2i+1), GPT-J",
                choices=("split", "interleaved"),
            ),
            _DTYPE,
            Parameter(
                "scaling",
                "string",
                "none",
                "long-context scaling",
                choices=("none", "linear", "dynamic", "yarn", "llama3", "longrope"),
            ),
            _factor("factor", "linear, dynamic, yarn, llama3 (required); longrope"),
            Parameter(
                "original_max_position_embeddings",
                "integer",
                None,
                "trained context length: dynamic, yarn, longrope (required); llama3 (8192)",
                1,
                2**31 - 1,
            ),
            _factor("low_freq_factor", "llama3", 1.0),
            _factor("high_freq_factor", "llama3", 4.0),
            _factor("beta_fast", "yarn", 32.0),
            _factor("beta_slow", "yarn", 1.0),
            _factor("attention_factor", "yarn, longrope: overrides the inferred factor"),
            _factor("mscale", "yarn"),
            _factor("mscale_all_dim", "yarn"),
            Parameter("truncate", "boolean", True, "yarn: round the ramp's ends outwards"),
            Parameter(
                "short_factor",
                "number list",
                None,
                "longrope: d/2 factors up to original_max_position_embeddings",
            ),
            Parameter("long_factor", "number list", None, "longrope: d/2 factors beyond it"),
            _RECIPE,
        ),
        rope.encode,
        rope.shape,
        scheme_checks.verify_rope,
        _rope_vectors,
        costs.rope,
        scheme_checks.verify_rope_cost,
        components=rope.COMPONENTS,
        similarity_vector=True,
    ),
    Scheme(
        "alibi",
        "Press et al. 2022: a linear bias -m_h·|i − j| per head",
        alibi.AlibiParams,
        (
            Parameter(
                "num_heads",
                "integer",
                8,
                "any count; the reference rule past powers of 2",
                1,
                alibi.MAX_HEADS,
            ),
            _DTYPE,
        ),
        alibi.encode,
        alibi.shape,
        scheme_checks.verify_alibi,
        None,
        costs.alibi,
        scheme_checks.verify_alibi_cost,
        components=alibi.COMPONENTS,
    ),
    Scheme(
        "t5",
        "Raffel et al. 2020: relative position buckets, int32",
        t5.T5Params,
        (
            Parameter("num_buckets", "integer", 32, "buckets", 2, 4096),
            Parameter(
                "max_distance",
                "integer",
                128,
                "distances from here share the last bucket",
                1,
                2**31 - 1,
            ),
            Parameter("bidirectional", "boolean", True, "encoder (true) or decoder (false)"),
        ),
        t5.encode,
        t5.shape,
        scheme_checks.verify_t5,
        None,
        costs.t5,
        scheme_checks.verify_t5_cost,
        dtypes=None,
    ),
    *(
        Scheme(
            f"sinusoidal{k}d",
            f"{k}-D sinusoids for {'images' if k == 2 else 'volumes'}: one "
            "block of channels per axis; rows are grid cells in row-major order",
            grid.Grid2DParams if k == 2 else grid.Grid3DParams,
            (
                _width(f"divisible by {2 * k} for the mae convention"),
                _BASE,
                _DTYPE,
                Parameter("grid", "integer list", None, f"{k} sides, replaces seq_len", 1, 2**24),
                Parameter(
                    "convention",
                    "string",
                    "mae",
                    "whose channel split",
                    choices=("mae", "positional-encodings"),
                ),
            ),
            grid.encode,
            grid.shape,
            scheme_checks.verify_grid,
            _rows(grid.encode),
            costs.grid,
            scheme_checks.verify_grid_cost,
            on_grid=True,
        )
        for k in (2, 3)
    ),
    *(
        Scheme(
            name,
            summary,
            baselines.BaselineParams,
            (_width(), _DTYPE),
            encode,
            baselines.shape,
            scheme_checks.verify_baseline,
            _rows(encode),
            costs.baseline,
            scheme_checks.verify_baseline_cost,
        )
        for name, summary, encode in (
            ("index", "teaching baseline: the position in every column", baselines.index),
            ("normalized", "teaching baseline: position / largest position", baselines.normalized),
            ("binary", "teaching baseline: bit j of the position in column j", baselines.binary),
        )
    ),
)

SCHEMES: dict[str, Scheme] = {scheme.name: scheme for scheme in _SCHEMES}


def get(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        known = ", ".join(SCHEMES)
        raise ParameterError("scheme", f"must be one of {known}, got {name!r}") from None
