"""The JSON Schemas the rope's operations share, read off
:class:`~posenc.schemes.rope.params.RopeParams`: one parameter's value (what a query parameter
takes, or an answer holds), and a rope's canonical parameters as answers give them — the GET
parameters of ``/v1/rope/table``, those that are None left out."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from posenc.declare import choices, hints, spec
from posenc.schemes.rope.params import RopeParams


def value_schema(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """A RopeParams field's value (never None) as a JSON Schema, with its range."""
    hint = hints(RopeParams)[f.name]
    allowed = choices(hint)
    limits = spec(f)
    if allowed is not None:
        return {"type": "string", "enum": list(allowed), "description": limits.doc}
    bounds = {
        key: value
        for key, value in (
            ("minimum", limits.ge),
            ("exclusiveMinimum", limits.gt),
            ("maximum", limits.le),
            ("exclusiveMaximum", limits.lt),
            ("multipleOf", limits.multiple_of),
        )
        if value is not None
    }
    (kind,) = [arg for arg in (typing.get_args(hint) or (hint,)) if arg is not type(None)]
    schema: dict[str, Any]
    if typing.get_origin(kind) is tuple:
        sized = {"minItems": limits.min_items, "maxItems": limits.max_items}
        schema = {"type": "array", "items": {"type": "number", **bounds}, **sized}
    elif kind is bool:
        schema = {"type": "boolean"}
    else:
        schema = {"type": "integer" if kind is int else "number", **bounds}
    return {**schema, "description": limits.doc}


def params_schema(left_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A rope's canonical parameters (``dataclasses.asdict`` of its RopeParams, the None values
    and the fields ``left_out`` dropped), as an object of exactly those members: those that
    cannot be None always there."""
    fields = [f for f in dataclasses.fields(RopeParams) if f.name not in left_out]
    return {
        "type": "object",
        "required": [f.name for f in fields if not _optional(f)],
        "additionalProperties": False,
        "properties": {f.name: value_schema(f) for f in fields},
    }


def _optional(f: dataclasses.Field[Any]) -> bool:
    return type(None) in typing.get_args(hints(RopeParams)[f.name])
