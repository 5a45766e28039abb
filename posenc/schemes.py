"""The registry of schemes: the only list of them anywhere.

Every scheme has the same shape (parameters dataclass, ``encode``, ``verify``), so neither this
registry nor the HTTP layer branches on a scheme's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc import sinusoidal, sinusoidal_verify
from posenc.errors import ParameterError
from posenc.verify import Report


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
    name: str
    summary: str
    params_type: type[Any]
    parameters: tuple[Parameter, ...]
    encode: Callable[[Any, npt.NDArray[np.int64], str], npt.NDArray[Any]]
    verify: Callable[[Any, npt.NDArray[Any], npt.NDArray[np.int64]], Report]


_COMMON = (
    Parameter(
        "d_model", "integer", None, "required; odd values are valid", 1, sinusoidal.MAX_D_MODEL
    ),
    Parameter("base", "number", 10000.0, "1 < base ≤ 1e12", 1, sinusoidal.MAX_BASE),
    Parameter(
        "layout",
        "string",
        "interleaved",
        "sin, cos, sin, cos … or all sines then all cosines",
        choices=("interleaved", "split"),
    ),
    Parameter(
        "dtype",
        "string",
        "float32",
        "the served type; computed in float64 and rounded once",
        choices=("float32", "float64", "float16"),
    ),
)

SCHEMES: dict[str, Scheme] = {
    scheme.name: scheme
    for scheme in (
        Scheme(
            "sinusoidal",
            "Vaswani et al. 2017: sin/cos of pos·base^(-2i/d_model), correctly rounded",
            sinusoidal.SinusoidalParams,
            _COMMON,
            sinusoidal.encode,  # type: ignore[arg-type]
            sinusoidal_verify.verify,
        ),
    )
}


def get(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        known = ", ".join(SCHEMES)
        raise ParameterError("scheme", f"must be one of {known}, got {name!r}") from None
