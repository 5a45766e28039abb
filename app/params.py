"""Query and body models: what a request may say, in the core's vocabulary.

Every model forbids extra fields, so a misspelt ``d_modle`` is a 422 naming it. Rows stay an
offset and a count (:class:`posenc.rows.Rows`) until the request is admitted.
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
from posenc.rows import Rows

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
    if not isinstance(value, str) or value not in posenc.SCHEMES:
        known = ", ".join(posenc.SCHEMES)
        raise PydanticCustomError(
            "scheme",
            "must be one of {known}, got {value}",
            {"known": known, "value": _shown(value)},
        )
    return value


def _comma_list(value: Any) -> Any:
    """``"1,2.5,3"`` in a query; a JSON list in a body."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    return value.split(",") if isinstance(value, str) else value


_Factor = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]
_Count = Annotated[int, Field(ge=1, le=2**31 - 1), _AnInteger]
FactorList = Annotated[list[_Factor], BeforeValidator(_comma_list), Field(min_length=1)]
GridSides = Annotated[
    list[Annotated[int, Field(ge=1, le=2**24), _AnInteger]],
    BeforeValidator(_comma_list),
    Field(min_length=2, max_length=3, description="grid sides, H,W or H,W,D"),
]


class EncodingQuery(BaseModel):
    """The encoding parameters (API.md §1 and the schemes' own, §6): each scheme takes some."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheme: Annotated[
        str,
        BeforeValidator(_scheme_name),
        Field(description="which encoding", json_schema_extra={"enum": list(posenc.SCHEMES)}),
    ] = "sinusoidal"
    d_model: (
        Annotated[
            int,
            Field(ge=1, le=65536, description="width of the encoding; odd values are valid"),
            _AnInteger,
        ]
        | None
    ) = None
    base: (
        Annotated[float, Field(gt=1, le=1e12, allow_inf_nan=False, description="1 < base ≤ 1e12")]
        | None
    ) = None
    layout: Literal["interleaved", "split"] | None = Field(
        None, description="interleaved: sin, cos, sin, cos …; split: sines then cosines"
    )
    dtype: Literal["float32", "float64", "float16"] | None = Field(
        None, description="served type (default float32); computed in float64, rounded once"
    )
    component: str | None = Field(None, description="which array of a scheme that has several")
    convention: (
        Literal["vaswani", "tensor2tensor", "fairseq", "mae", "positional-encodings"] | None
    ) = Field(
        None,
        description="sinusoidal: vaswani, tensor2tensor, fairseq; "
        "sinusoidal2d/3d: mae, positional-encodings",
    )
    padding_idx: Position | None = Field(None, description="fairseq: the zero row")
    scaling: Literal["none", "linear", "dynamic", "yarn", "llama3", "longrope"] | None = None
    factor: _Factor | None = None
    original_max_position_embeddings: _Count | None = None
    low_freq_factor: _Factor | None = None
    high_freq_factor: _Factor | None = None
    beta_fast: _Factor | None = None
    beta_slow: _Factor | None = None
    attention_factor: _Factor | None = None
    mscale: _Factor | None = None
    mscale_all_dim: _Factor | None = None
    truncate: bool | None = None
    short_factor: FactorList | None = None
    long_factor: FactorList | None = None
    num_heads: Annotated[int, Field(ge=1, le=1024), _AnInteger] | None = None
    num_buckets: Annotated[int, Field(ge=2, le=4096), _AnInteger] | None = None
    max_distance: _Count | None = None
    bidirectional: bool | None = None
    grid: GridSides | None = None
    recipe: Literal["exact", "framework"] | None = Field(
        None, description="rope, sinusoidal: exact (default) or the library's own float32 recipe"
    )

    def core(self) -> Any:
        """The scheme's own parameters dataclass; a parameter it does not take is refused."""
        scheme = posenc.get(self.scheme)
        fields = dataclasses.fields(scheme.params_type)
        names = {field.name for field in fields}
        # An explicit null (JSON bodies) means "not given", like a missing field.
        given = {n for n in self.model_fields_set & _SCHEME_FIELDS if getattr(self, n) is not None}
        for name in sorted(given - names):
            raise NotApplicableError(name, self.scheme)
        for field in fields:
            required = field.default is dataclasses.MISSING
            if required and field.name not in given:
                raise ParameterError(field.name, f"is required for scheme {self.scheme!r}")
        values = {name: getattr(self, name) for name in given}
        return scheme.params_type(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        )

    def served_dtype(self) -> str:
        dtypes = posenc.get(self.scheme).dtypes
        if dtypes is None:
            if self.dtype is not None:
                raise NotApplicableError("dtype", self.scheme, "its values are int32")
            return "int32"
        return self.dtype or dtypes[0]

    def chosen_component(self) -> str:
        components = posenc.get(self.scheme).components
        if not components:
            if self.component is not None:
                raise NotApplicableError("component", self.scheme, "it has one array")
            return ""
        if self.component is None:
            return components[0]
        if self.component not in components:
            raise ParameterError(
                "component", f"must be one of {', '.join(components)}, got {self.component!r}"
            )
        return self.component


# The fields above that belong to a scheme's parameters rather than to the request.
_SCHEME_FIELDS = frozenset(EncodingQuery.model_fields) - {"scheme", "dtype", "component"}


PictureSide = Annotated[int, Field(ge=1, le=4096, description="png only: pixels"), _AnInteger]


class ArrayQuery(EncodingQuery):
    format: Format | None = Field(None, description="wins over the Accept header; default json")
    width: PictureSide | None = None
    height: PictureSide | None = None


class RowsQuery(EncodingQuery):
    seq_len: SeqLen | None = None
    offset: Position = 0

    def rows(self, params: Any) -> Rows:
        """The table's rows, still unallocated: positions offset … offset+seq_len-1, or every
        cell of the grid."""
        scheme = posenc.get(self.scheme)
        if scheme.on_grid:
            for name in ("seq_len", "offset"):
                if name in self.model_fields_set:
                    raise NotApplicableError(name, self.scheme, "grid= sets the rows")
            return Rows(math.prod(params.grid))
        if self.seq_len is None:
            raise ParameterError("seq_len", f"is required for scheme {self.scheme!r}")
        return Rows(self.seq_len, self.offset)


class TableQuery(RowsQuery):
    format: Format | None = Field(None, description="wins over the Accept header; default json")
    width: PictureSide | None = None
    height: PictureSide | None = None


class EncodeQuery(ArrayQuery):
    positions: PositionList


class SimilarityQuery(TableQuery):
    metric: Metric = Field("cosine", description="cosine, dot or euclidean")
    reference: Position | None = Field(None, description="compare every row with this position")
    vector: FactorList | None = Field(
        None, description="rope: the vector u whose rotations R_p u are compared (d_model numbers)"
    )


class VerifyQuery(RowsQuery):
    seq_len: SeqLen | None = 128


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
    vectors: list[list[float]] | None = Field(
        None, description="rope: shape (len(positions), d_model); returned rotated"
    )
    scale: bool = Field(False, description="multiply embeddings by sqrt(d_model) first")
