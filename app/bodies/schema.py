"""A JSON body held to the schema the OpenAPI document gives it, before anything reads it.

Generated clients and fuzzers take the document at its word: a body the document calls invalid
must be refused, not read leniently by whichever code happens to look at the field. Only the
keywords the service's body schemas use are understood, and a schema using any other is an
error at start-up (:func:`check_schema`), so that no keyword is silently skipped. The walk
follows the schema, never the value, so its depth is the schema's.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from posenc.errors import ParameterError

# Keywords that constrain; the rest only describe.
_CONSTRAINTS = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "anyOf",
    }
)
_ANNOTATIONS = frozenset({"description", "examples", "title"})
_ARTICLED = {"array": "an array", "object": "an object", "integer": "an integer", "null": "null"}
_BOUNDS: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
    ("minimum", operator.ge, "≥"),
    ("maximum", operator.le, "≤"),
    ("exclusiveMinimum", operator.gt, ">"),
    ("exclusiveMaximum", operator.lt, "<"),
)
_PYTHON: dict[str, type] = {"string": str, "array": list, "object": dict, "null": type(None)}


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise ValueError when ``schema`` uses a keyword :func:`validate` does not enforce."""
    unknown = set(schema) - _CONSTRAINTS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"body schema keywords not enforced: {sorted(unknown)}")
    for sub in (*schema.get("properties", {}).values(), *schema.get("anyOf", ())):
        check_schema(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            check_schema(schema[key])


def validate(value: Any, schema: Mapping[str, Any], where: str = "body") -> None:
    """Raise :class:`ParameterError` naming the first place where ``value`` breaks ``schema``.

    >>> validate({"rope_theta": True}, {"properties": {"rope_theta": {"type": "number"}}})
    Traceback (most recent call last):
    ...
    posenc.errors.ParameterError: rope_theta: must be a number, got True
    """
    if "anyOf" in schema:
        _any_of(value, schema["anyOf"], where)
    types = schema.get("type")
    if types is not None:
        allowed = (types,) if isinstance(types, str) else tuple(types)
        if not any(_is(value, kind) for kind in allowed):
            named = " or ".join(_ARTICLED.get(kind, "a " + kind) for kind in allowed)
            raise ParameterError(where, f"must be {named}, got {_short(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise ParameterError(where, f"must be one of {schema['enum']}, got {_short(value)}")
    if _is(value, "number"):
        for key, holds, sign in _BOUNDS:
            if key in schema and not holds(value, schema[key]):
                raise ParameterError(where, f"must be {sign} {schema[key]}, got {value}")
        if "multipleOf" in schema and value % schema["multipleOf"]:
            raise ParameterError(
                where, f"must be a multiple of {schema['multipleOf']}, got {value}"
            )
    if isinstance(value, dict):
        _members(value, schema, where)
    if isinstance(value, list):
        _items(value, schema, where)


def _items(value: list[Any], schema: Mapping[str, Any], where: str) -> None:
    if len(value) < schema.get("minItems", 0):
        raise ParameterError(where, f"must hold at least {_items_count(schema['minItems'])}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise ParameterError(where, f"must hold at most {_items_count(schema['maxItems'])}")
    if "items" in schema:
        for index, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{index}]")


def _items_count(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _members(value: dict[str, Any], schema: Mapping[str, Any], where: str) -> None:
    for key in schema.get("required", ()):
        if key not in value:
            raise ParameterError(key if where == "body" else f"{where}.{key}", "is required")
    properties = schema.get("properties", {})
    others = schema.get("additionalProperties", True)
    for key, member in value.items():
        inner = key if where == "body" else f"{where}.{key}"
        if key in properties:
            validate(member, properties[key], inner)
        elif others is False:
            raise ParameterError(inner, "is not a field this body may hold")
        elif isinstance(others, Mapping):
            validate(member, others, inner)


def _any_of(value: Any, choices: list[Mapping[str, Any]], where: str) -> None:
    errors: list[tuple[int, ParameterError]] = []
    for choice in choices:
        try:
            validate(value, choice, where)
            return
        except ParameterError as error:
            errors.append((_aimed(value, choice), error))
    # The complaint of the choice the value was meant for (it holds that choice's required
    # keys: a video segment's, not the text segment's), else the deepest: the field to fix.
    _, worst = max(errors, key=lambda pair: (pair[0], pair[1].param.count(".")))
    raise worst


def _aimed(value: Any, choice: Mapping[str, Any]) -> int:
    required = choice.get("required", ())
    return int(bool(required) and isinstance(value, dict) and all(k in value for k in required))


def _is(value: Any, kind: str) -> bool:
    # JSON's booleans are not numbers, though Python's are ints; 1.0 is an integer in JSON.
    if isinstance(value, bool):
        return kind == "boolean"
    if kind == "number":
        return isinstance(value, int | float)
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return kind in _PYTHON and isinstance(value, _PYTHON[kind])


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
