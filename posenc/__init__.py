"""posenc: Transformer positional encodings, exact to the last bit. Pure NumPy."""

__version__ = "0.2.0"

from posenc.cache import ByteBoundedCache, CacheStats
from posenc.declare import Scheme
from posenc.errors import NotApplicableError, ParameterError, PosencError
from posenc.registry import SCHEMES, get
from posenc.sinusoidal import SinusoidalParams, encode, frequencies, table
from posenc.verify import Check, Report, Statistic

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
