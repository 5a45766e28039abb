"""Typed values out of a ``config.json``: numbers, integers, and the defaults of its config class
where it gives none; a value of the wrong kind is refused, naming its field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from posenc.errors import ParameterError
from posenc.schemes.rope.models.class_defaults import CLASS_DEFAULTS


def first(*values: float | None) -> Any:
    """The first value given (0 included: a given 0 is refused later, not replaced)."""
    return next((value for value in values if value is not None), None)


# Where a config keeps its rope dict, in the order transformers reads them.
ROPE_DICTS = ("rope_scaling", "rope_parameters")


def rope_dict(text: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The rope dict and the field it came from, as transformers reads them (``rope_scaling or
    rope_parameters``: the first that is not empty); ``{}`` for the plain rope of old configs."""
    for where in ROPE_DICTS:
        rope = text.get(where)
        if not rope:
            continue
        if not isinstance(rope, Mapping):
            raise ParameterError(where, f"must be an object, got {type(rope).__name__}")
        return where, rope
    return "rope_parameters", {}


def class_defaults(config: Mapping[str, Any]) -> dict[str, float]:
    """The defaults of the config's class, for the keys the reader reads (measured)."""
    model_type = config.get("model_type")
    return CLASS_DEFAULTS.get(model_type, {}) if isinstance(model_type, str) else {}


def number(source: Mapping[str, Any], name: str, where: str) -> float | None:
    value = source.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        field = f"{where}.{name}" if where else name
        raise ParameterError(field, f"must be a finite number, got {value!r}")
    return float(value)


def integer(source: Mapping[str, Any], name: str, where: str) -> int | None:
    value = number(source, name, where)
    if value is None:
        return None
    if not value.is_integer() or not 1 <= value <= 2**31 - 1:
        field = f"{where}.{name}" if where else name
        raise ParameterError(field, f"must be an integer in [1, 2^31), got {source[name]!r}")
    return int(value)


MAX_SECTION = 65536  # frequencies in one multimodal section, at most


def integral(value: Any) -> bool:
    """An integer, or an integral float (24.0), as JSON Schema's integer; never a bool."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def sections(value: Any, field: str, axes: tuple[int, ...] = (3,)) -> tuple[int, ...]:
    """A multimodal rope's section sizes, as many as one of ``axes`` (24.0 is the integer 24,
    as JSON and transformers read it)."""
    if not (
        isinstance(value, list | tuple)
        and len(value) in axes
        and all(integral(v) and 0 < v <= MAX_SECTION for v in value)
    ):
        count = "three" if axes == (3,) else " or ".join(map(str, axes))
        shown = repr(list(value)) if isinstance(value, tuple) else repr(value)
        raise ParameterError(field, f"must be {count} positive integers, got {shown}")
    return tuple(int(v) for v in value)
