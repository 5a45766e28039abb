"""Query and body models: what a request may say, in the core's vocabulary, and what it may cost.

Every model forbids extra fields, so a misspelt ``d_modle`` is a 422 naming it. Sizes are
checked here, from the parameters alone, before anything is allocated.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

import posenc
from posenc.errors import NotApplicableError, ParameterError
from posenc.exact import MAX_POSITION

Format = Literal["json", "npy", "bin", "csv", "plotly", "png"]
TEXT_FORMATS: frozenset[str] = frozenset({"json", "csv", "plotly"})
Metric = Literal["cosine", "dot", "euclidean"]


def _integer(value: Any) -> Any:
    """Integers and integer-valued floats (``3``, ``3.0``, ``"1e3"``); nothing else."""
    if isinstance(value, bool):
        raise _not_an_integer(value)
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and (not text.isascii() or "_" in text):
        raise _not_an_integer(value)
    try:
        number = float(text)
    except (TypeError, ValueError):
        raise _not_an_integer(value) from None
    if not math.isfinite(number) or not number.is_integer():
        raise _not_an_integer(value)
    return int(number)


def _not_an_integer(value: Any) -> PydanticCustomError:
    return PydanticCustomError(
        "integer", "must be an integer, got {value}", {"value": _shown(value)}
    )


# Constraints stand before the validator so that OpenAPI shows them as minimum/maximum.
_AnInteger = BeforeValidator(_integer)
Position = Annotated[
    int, Field(ge=0, le=MAX_POSITION, description="a position, 0 ≤ pos < 2^31"), _AnInteger
]
SeqLen = Annotated[
    int, Field(ge=1, le=MAX_POSITION + 1, description="number of positions, ≥ 1"), _AnInteger
]


def _position_list(value: Any) -> Any:
    """``"0,5,17"``, or repeated ``positions=`` query items, each of which may hold commas."""
    parts = [value] if isinstance(value, str) else value
    if not isinstance(parts, list) or not all(isinstance(part, str) for part in parts):
        return value
    items = [item for part in parts for item in part.split(",")]
    if items == [""]:
        raise PydanticCustomError("positions", "must list at least one position", {})
    return items


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


PositionList = Annotated[
    list[Position],
    BeforeValidator(_position_list),
    Field(min_length=1, description="positions, comma-separated in a query: 0,5,17"),
]


def _scheme_name(value: Any) -> Any:
    if value not in posenc.SCHEMES:
        known = ", ".join(posenc.SCHEMES)
        raise PydanticCustomError(
            "scheme",
            "must be one of {known}, got {value}",
            {"known": known, "value": _shown(value)},
        )
    return value


class EncodingQuery(BaseModel):
    """The encoding parameters every endpoint shares (API.md §1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheme: Annotated[
        str,
        BeforeValidator(_scheme_name),
        Field(description="which encoding", json_schema_extra={"enum": list(posenc.SCHEMES)}),
    ] = "sinusoidal"
    d_model: Annotated[
        int,
        Field(ge=1, le=65536, description="width of the encoding; odd values are valid"),
        _AnInteger,
    ]
    base: Annotated[
        float, Field(gt=1, le=1e12, allow_inf_nan=False, description="1 < base ≤ 1e12")
    ] = 10000.0
    layout: Literal["interleaved", "split"] = Field(
        "interleaved", description="interleaved: sin, cos, sin, cos …; split: sines then cosines"
    )
    dtype: Literal["float32", "float64", "float16"] = Field(
        "float32", description="served type; computed in float64 and rounded once"
    )

    def core(self) -> Any:
        """The scheme's own parameters dataclass; a parameter it does not take is refused."""
        scheme = posenc.get(self.scheme)
        names = {field.name for field in dataclasses.fields(scheme.params_type)}
        for name in self.model_fields_set & (_SCHEME_FIELDS - names):
            raise NotApplicableError(name, self.scheme)
        return scheme.params_type(**{name: getattr(self, name) for name in names})


# The fields above that belong to a scheme's parameters rather than to the request.
_SCHEME_FIELDS = frozenset({"d_model", "base", "layout"})


class ArrayQuery(EncodingQuery):
    format: Format | None = Field(None, description="wins over the Accept header; default json")


class TableQuery(ArrayQuery):
    seq_len: SeqLen
    offset: Position = 0

    def positions_end(self) -> int:
        return self.offset + self.seq_len


class EncodeQuery(ArrayQuery):
    positions: PositionList


class SimilarityQuery(TableQuery):
    metric: Metric = Field("cosine", description="cosine, dot or euclidean")
    reference: Position | None = Field(None, description="compare every row with this position")


class VerifyQuery(EncodingQuery):
    seq_len: SeqLen = 128
    offset: Position = 0


class ConformanceQuery(EncodingQuery):
    offset: Position = 0
    tolerance_ulp: float = Field(
        1.0,
        gt=0,
        le=1e6,
        allow_inf_nan=False,
        description="a position is bad when one of its values is off by more ulps than this",
    )
    format: Literal["json", "plotly"] | None = Field(
        None, description="json: the report; plotly: error by position on a log scale"
    )


class EncodeBody(EncodingQuery):
    positions: PositionList
    embeddings: list[list[float]] | None = Field(
        None, description="shape (len(positions), d_model); the encoding is added to it"
    )
    scale: bool = Field(False, description="multiply embeddings by sqrt(d_model) first")


def check_consecutive(seq_len: int, offset: int) -> None:
    if offset + seq_len - 1 > MAX_POSITION:
        raise ParameterError(
            "seq_len", f"offset + seq_len must be ≤ 2^31, got {offset} + {seq_len}"
        )


class LimitExceededError(ParameterError):
    """An answer larger than the configured limit, refused before it is computed."""

    def __init__(self, param: str, what: str, size: int, limit: int, setting: str) -> None:
        super().__init__(
            param, f"{what} would hold {size} values, over the limit of {limit} ({setting})"
        )
        self.size = size
        self.limit = limit


def check_size(param: str, what: str, size: int, limit: int, setting: str) -> None:
    if size > limit:
        raise LimitExceededError(param, what, size, limit, setting)
