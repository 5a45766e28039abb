"""posenc: Transformer positional encodings, exact to the last bit. Pure NumPy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.1"

if TYPE_CHECKING:
    from posenc.cache import ByteBoundedCache, CacheStats
    from posenc.declare import Scheme
    from posenc.errors import NotApplicableError, ParameterError, PosencError
    from posenc.registry import SCHEMES, get
    from posenc.schemes.sinusoidal.maths import encode, frequencies, table
    from posenc.schemes.sinusoidal.params import SinusoidalParams
    from posenc.verify import Check, Report, Statistic

# Each public name is imported where it lives on first use: the registry loads numba and every
# scheme's kernels, which `posenc --help` (posenc.cli) and `import posenc.errors` do not need.
_HOMES = {
    "SCHEMES": "posenc.registry",
    "ByteBoundedCache": "posenc.cache",
    "CacheStats": "posenc.cache",
    "Check": "posenc.verify",
    "NotApplicableError": "posenc.errors",
    "ParameterError": "posenc.errors",
    "PosencError": "posenc.errors",
    "Report": "posenc.verify",
    "Scheme": "posenc.declare",
    "SinusoidalParams": "posenc.schemes.sinusoidal.params",
    "Statistic": "posenc.verify",
    "encode": "posenc.schemes.sinusoidal.maths",
    "frequencies": "posenc.schemes.sinusoidal.maths",
    "get": "posenc.registry",
    "table": "posenc.schemes.sinusoidal.maths",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'posenc' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "SCHEMES",
    "ByteBoundedCache",
    "CacheStats",
    "Check",
    "NotApplicableError",
    "ParameterError",
    "PosencError",
    "Report",
    "Scheme",
    "SinusoidalParams",
    "Statistic",
    "encode",
    "frequencies",
    "get",
    "table",
]
