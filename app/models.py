"""Each scheme's request models, built from its declaration: exactly its parameters, with their
ranges and docs, required ones required — so the OpenAPI document says what the scheme takes.

Every model forbids extra fields, so a misspelt ``d_modle`` is a 422 naming it. Rows stay an
offset and a count (:class:`posenc.rows.Rows`) until the request is admitted.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal

from fastapi.exceptions import RequestValidationError
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    create_model,
)
from pydantic_core import PydanticCustomError

from posenc.declare import Scheme, hints, spec
from posenc.numerics.exact import MAX_POSITION
from posenc.rows import Rows

Format = Literal["json", "npy", "bin", "csv", "plotly", "png"]
TEXT_FORMATS: frozenset[str] = frozenset({"json", "csv", "plotly"})
# X-Array-Shape: one to three dimensions, none empty (a non-empty array is a rule of the body).
SHAPE_PATTERN = "^[1-9][0-9]*(,[1-9][0-9]*){0,2}$"
_POSITIONS_ABOUT = "the positions (grid schemes: row-major cell indices)"
Metric = Literal["cosine", "dot", "euclidean"]
Endpoint = Literal["table", "encode", "similarity", "verify", "conformance", "encode_body"]


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


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _comma_list(value: Any) -> Any:
    """``"1,2.5,3"`` or repeated items in a query (each may hold commas); a JSON list as is."""
    parts = [value] if isinstance(value, str) else value
    if isinstance(parts, list) and all(isinstance(part, str) for part in parts):
        items = [item for part in parts for item in part.split(",")]
        return [] if items == [""] else items
    return value


# Constraints stand before the validator so that OpenAPI shows them as minimum/maximum.
_AnInteger = BeforeValidator(_integer)
Position = Annotated[
    int, Field(ge=0, le=MAX_POSITION, description="a position, 0 ≤ pos < 2^31"), _AnInteger
]
SeqLen = Annotated[
    int, Field(ge=1, le=MAX_POSITION + 1, description="number of positions, ≥ 1"), _AnInteger
]
PositionList = Annotated[
    list[Position],
    BeforeValidator(_comma_list),
    Field(min_length=1, description="positions: 0,5,17 (or repeated); any order, duplicates"),
]
PictureSide = Annotated[
    int, Field(ge=1, le=4096, description="pixels of a png; other formats have none"), _AnInteger
]
_Vector = Annotated[
    list[Annotated[float, Field(allow_inf_nan=False, ge=-1e6, le=1e6)]],
    BeforeValidator(_comma_list),
    # The vector travels in the URL: at most 4096 numbers keep it within what servers accept.
    Field(min_length=2, max_length=4096),
]


# Rows of numbers, at least one each; their common length (d_model) is a rule of the body.
_Rows = Annotated[list[Annotated[list[float], Field(min_length=1)]], Field(min_length=1)]


def _field_type(hint: Any, limits: dict[str, Any], strict: bool = False) -> Any:
    """A dataclass field's type as a query parameter, its range attached where it applies."""
    optional = type(None) in typing.get_args(hint)
    if optional:
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        items = {k: v for k, v in limits.items() if k in ("ge", "gt", "le", "lt")}
        element: Any = _field_type(item, items)
        sized = Field(min_length=limits.get("min_items"), max_length=limits.get("max_items"))
        made: Any = Annotated[list[element], BeforeValidator(_comma_list), sized]
    elif hint is int:
        made = Annotated[int, Field(**limits), _AnInteger]
    elif hint is float:
        made = Annotated[float, Field(allow_inf_nan=False, **limits)]
    elif hint is bool and strict:
        made = StrictBool  # a JSON body says true or false; a query's text is read as one
    else:
        made = hint  # bool, Literal[...]
    return made | None if optional else made


def _scheme_fields(scheme: Scheme, strict: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    types_of = hints(scheme.params)
    for f in scheme.fields():
        s = spec(f)
        limits = {
            "ge": s.ge,
            "gt": s.gt,
            "le": s.le,
            "lt": s.lt,
            "multiple_of": s.multiple_of,
            "min_items": s.min_items,
            "max_items": s.max_items,
        }
        limits = {k: v for k, v in limits.items() if v is not None}
        default = ... if f.default is dataclasses.MISSING else f.default
        fields[f.name] = (
            _field_type(types_of[f.name], limits, strict),
            Field(default, description=s.doc),
        )
    return fields


def _adds(scheme: Scheme) -> bool:
    """Embeddings can be added to the encoding where each position has one vector."""
    if scheme.vectors is None or not scheme.examples:
        return False
    example = scheme.params(**scheme.examples[0])
    default = scheme.components[0] if scheme.components else ""
    return len(scheme.shape(example, 1, default)) == 2


def _request_fields(scheme: Scheme, endpoint: Endpoint) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if scheme.dtypes is not None:
        fields["dtype"] = (
            Literal[scheme.dtypes],
            Field(scheme.dtypes[0], description="the served type; computed exactly, rounded once"),
        )
    if scheme.components and endpoint in ("table", "encode", "conformance", "encode_body"):
        fields["component"] = (
            Literal[scheme.components],
            Field(scheme.components[0], description="which of the scheme's arrays"),
        )
    rows_by_position = scheme.rows == "positions"
    if endpoint in ("table", "similarity", "verify") and rows_by_position:
        seq_len_default: Any = 128 if endpoint == "verify" else ...
        fields["seq_len"] = (SeqLen, Field(seq_len_default))
        fields["offset"] = (Position, Field(0, description="the first position"))
    if endpoint == "encode":
        fields["positions"] = (
            # In a query a lone position is a list of one; said so, so schemas take positions=5.
            PositionList | Position,
            Field(..., description=_POSITIONS_ABOUT),
        )
    if endpoint == "encode_body":
        fields.update(_listed(scheme))
    if endpoint == "similarity":
        fields["metric"] = (Metric, Field("cosine", description="cosine, dot or euclidean"))
        fields["reference"] = (
            Position | None,
            Field(None, description="compare every row with this position"),
        )
        if scheme.rotates:
            fields["vector"] = (
                _Vector | None,
                Field(
                    None,
                    description="the query q whose rotations R_m q are compared "
                    "(d_model numbers; default: all entries equal)",
                ),
            )
            fields["key"] = (
                _Vector | None,
                Field(
                    None,
                    description="the key k whose rotations R_n k the rows hold: "
                    "S[m, n] = metric(R_m q, R_n k) (d_model numbers; default: the query)",
                ),
            )
    if endpoint == "conformance":
        fields["offset"] = (Position, Field(0, description="the position of the first row"))
        if rows_by_position:
            fields["seq_len"] = (
                SeqLen | None,
                Field(
                    None,
                    description="the body's number of rows (positions): optional, so that the "
                    "GET's query can be sent as it is; must then equal them",
                ),
            )
        fields["tolerance_ulp"] = (
            float,
            Field(
                1.0,
                gt=0,
                le=1e6,
                allow_inf_nan=False,
                description="a position is bad when a value is off by more ulps than this",
            ),
        )
        fields["format"] = (
            Literal["json", "plotly"],
            Field("json", description="json: the report; plotly: error by position, log scale"),
        )
    if endpoint in ("table", "encode", "similarity"):
        fields["format"] = (
            Format | None,
            Field(None, description="wins over the Accept header; default json"),
        )
        fields["width"] = (PictureSide | None, Field(None))
        fields["height"] = (PictureSide | None, Field(None))
    if endpoint == "encode_body" and _adds(scheme):
        fields["embeddings"] = (
            _Rows | None,
            Field(None, description="shape (len(positions), d_model); the encoding is added"),
        )
        if scheme.rotates:
            fields["vectors"] = (
                _Rows | None,
                Field(None, description="shape (len(positions), d_model); returned rotated"),
            )
    if endpoint == "encode_body":
        fields["scale"] = (
            StrictBool,  # a JSON body says true or false, not 0 or "yes"
            Field(False, description="multiply embeddings by √d_model"),
        )
    return fields


def _listed(scheme: Scheme) -> dict[str, Any]:
    """A body's positions: required, or, where the scheme turns a token by several ids, these
    ids (``position_ids``) and the options saying which frequency turns by which."""
    if scheme.ids is None:
        return {"positions": (PositionList, Field(..., description=_POSITIONS_ABOUT))}
    ids = scheme.ids
    rows = Annotated[list[PositionList], Field(min_length=ids.rows, max_length=ids.rows)]
    # Each may be left out, not sent as null: the body's oneOf (_one_of_listed) says which.
    return {
        "positions": (
            _absent_or(PositionList),
            Field(
                None,
                description=f"{_POSITIONS_ABOUT}; or position_ids",
                json_schema_extra=_no_default,
            ),
        ),
        "position_ids": (
            _absent_or(rows),
            Field(
                None,
                description=f"{ids.rows} ids a token (rows of equal length, a column a token), "
                f"in place of positions; with {ids.key}",
                json_schema_extra=_no_default,
            ),
        ),
        ids.key: (
            _absent_or(dict[str, Any], ids.schema),
            Field(
                None,
                description=f"with position_ids: {ids.schema['description']}",
                json_schema_extra=_no_default,
            ),
        ),
    }


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)  # left out, not null: no value stands for it


def _absent_or(kind: Any, schema: dict[str, Any] | None = None) -> Any:
    """``kind`` or left out (None in the model), documented as ``kind`` (or ``schema``)."""
    shown = schema if schema is not None else TypeAdapter(kind).json_schema()
    return Annotated[kind | None, WithJsonSchema(shown)]


def _one_of_listed(scheme: Scheme) -> Callable[[dict[str, Any]], None] | None:
    """A body of a scheme with several ids a token is one of two fully typed objects:
    ``positions`` (with what goes with one position a token), or ``position_ids`` with its
    options. Two closed objects, not one with a list of required members per case: generated
    clients (openapi-typescript, openapi-python-client) type each, where an ``anyOf`` of bare
    ``required`` lists left them with ``unknown``."""
    if scheme.ids is None:
        return None
    key = scheme.ids.key
    by_ids = {"position_ids", key}
    by_position = {"positions", "embeddings", "vectors"}

    def alternatives(schema: dict[str, Any]) -> None:
        properties: dict[str, Any] = schema.pop("properties")
        required: list[str] = schema.pop("required", [])
        schema.pop("additionalProperties", None)
        schema.pop("type", None)
        title = schema.get("title", "Body")
        schema["oneOf"] = [
            {
                "type": "object",
                "title": f"{title}Positions",
                "description": "positions, one a token",
                "additionalProperties": False,
                "properties": {k: v for k, v in properties.items() if k not in by_ids},
                "required": [*required, "positions"],
            },
            {
                "type": "object",
                "title": f"{title}PositionIds",
                "description": f"position_ids, several a token, with {key}",
                "additionalProperties": False,
                "properties": {k: v for k, v in properties.items() if k not in by_position},
                "required": [*required, *sorted(by_ids)],
            },
        ]

    return alternatives


@cache
def model(scheme: Scheme, endpoint: Endpoint) -> type[BaseModel]:
    """The query (or body) model of one scheme's operation, made once."""
    title = "".join(part.title() for part in scheme.name.replace("-", "_").split("_"))
    built: type[BaseModel] = create_model(
        f"{title}{endpoint.title().replace('_', '')}Parameters",
        __config__=ConfigDict(
            extra="forbid",
            frozen=True,
            json_schema_extra=_one_of_listed(scheme) if endpoint == "encode_body" else None,
        ),
        **_scheme_fields(scheme, strict=endpoint == "encode_body"),
        **_request_fields(scheme, endpoint),
    )
    return built


def body_members(scheme: Scheme, small: dict[str, Any]) -> Any:
    """A POST /encode body's small members, validated as its model says (the arrays, read
    apart, stand in as a placeholder)."""
    try:
        return model(scheme, "encode_body").model_validate(small)
    except ValidationError as e:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in e.errors()]
        raise RequestValidationError(errors) from None


def params_of(scheme: Scheme, query: BaseModel) -> Any:
    """The scheme's own parameters dataclass from a validated query; the core checks the rules
    that tie parameters together and names the one at fault."""
    values = {}
    for f in scheme.fields():
        value = getattr(query, f.name)
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return scheme.params(**values)


def dtype_of(scheme: Scheme, query: BaseModel) -> str:
    return str(getattr(query, "dtype", "int32"))


def component_of(scheme: Scheme, query: BaseModel) -> str:
    return str(getattr(query, "component", "") or (scheme.components[:1] or ("",))[0])


def rows_of(scheme: Scheme, query: BaseModel, params: Any) -> Rows:
    """The rows, still unallocated: positions offset … offset+seq_len-1, or every grid cell."""
    if scheme.rows == "grid":
        return Rows(math.prod(params.grid))
    return Rows(getattr(query, "seq_len"), getattr(query, "offset"))  # noqa: B009


@cache  # per query model, once: walking the annotations was 0.3 ms of every GET (issue 25)
def list_fields(model_type: type[BaseModel]) -> frozenset[str]:
    """Fields that take a list, whose repeated query items are kept together: ``list[…]``
    itself, in a union (``X | None``, ``typing.Union``) or under ``Annotated``."""
    found = set()
    for name, info in model_type.model_fields.items():
        annotation = info.annotation
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        for option in (annotation, *(typing.get_args(annotation) if union else ())):
            if typing.get_origin(option) is typing.Annotated:
                option = typing.get_args(option)[0]
            if typing.get_origin(option) is list:
                found.add(name)
    return frozenset(found)
