"""The query of an operation beyond the common four (an extra): its own parameters, each read as
its schema's type says, counted and checked before the body is read; any other is refused."""

from __future__ import annotations

import math
import re
from typing import Any

from fastapi import Request

from app import bodies
from posenc.declare import Extra
from posenc.errors import ParameterError

# ASCII digits only: str.isdigit takes "²", which int() then refuses.
_INTEGER = re.compile(r"-?[0-9]{1,19}")


def extra_query(request: Request, extra: Extra) -> tuple[str, dict[str, Any]]:
    """The format (json, or npy where the extra has an array answer) and the extra's own
    query parameters, each read as its schema's type says; the body carries everything else,
    so any other query parameter would go unheard: refused."""
    own = {param.name: param for param in extra.query}
    sent: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        if name in own:
            sent.setdefault(name, []).append(value)
        elif name != "format" or extra.array is None:
            raise ParameterError(name, "this operation takes no such query parameter")
        elif value not in ("json", "npy"):
            raise ParameterError("format", f"must be json or npy, got {value[:40]!r}")
    given: dict[str, Any] = {}
    for name, values in sent.items():
        schema = own[name].schema
        kind = schema.get("type", "integer")
        if kind == "array":
            # As the document's default form sends an array (name=a&name=b), or as one
            # comma-separated value; counted before any is parsed.
            items = [item for value in values if value for item in value.split(",")]
            most = schema.get("maxItems", len(items))
            if len(items) > most:
                raise ParameterError(name, f"lists at most {most} numbers, got {len(items)}")
            given[name] = [_number(name, item) for item in items]
        elif len(values) > 1:
            raise ParameterError(name, "is given twice")
        else:
            given[name] = _typed(name, values[0], kind)
        bodies.validate(given[name], schema, name)
    return request.query_params.get("format", "json"), given


_NUMBER = re.compile(
    r"[-+]?(?:[0-9]{1,400}(?:\.[0-9]{0,400})?|\.[0-9]{1,400})(?:[eE][-+]?[0-9]{1,4})?"
)
_BOOLEANS = {"true": True, "false": False}


def _typed(name: str, value: str, kind: str) -> Any:
    """A query value as its schema's type: an integer (ASCII digits), a finite number, true or
    false, or the text itself."""
    if kind == "integer":
        if not _INTEGER.fullmatch(value):
            raise ParameterError(name, f"must be one integer, got {value[:40]!r}")
        return int(value)
    if kind == "number":
        return _number(name, value)
    if kind == "boolean":
        if value not in _BOOLEANS:
            raise ParameterError(name, f"must be true or false, got {value[:40]!r}")
        return _BOOLEANS[value]
    return value


def _number(name: str, value: str) -> float:
    if not _NUMBER.fullmatch(value) or not math.isfinite(float(value)):
        raise ParameterError(name, f"must be a finite number, got {value[:40]!r}")
    return float(value)


# --- the ?scheme= aliases -------------------------------------------------------------------
