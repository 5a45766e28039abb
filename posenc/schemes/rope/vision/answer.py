"""``POST /v1/rope/vision``: a model's config and a patch grid → the cos/sin (or angles) its
vision tower applies, patch by patch in the order its attention sees them, with the ids each
patch turns by."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from posenc.cost import Cost
from posenc.declare import Limits, Sized
from posenc.errors import LimitError, ParameterError, against_model_type
from posenc.numerics.costs import SCRATCH
from posenc.schemes.rope.vision import tables
from posenc.schemes.rope.vision.config import VisionRope, read
from posenc.schemes.rope.vision.positions import count, order

# Per patch: its two int64 ids, their JSON text (at most 8 characters each with the brackets
# and commas) and Qwen2.5-VL's window index (int64, padded); the work of writing them.
_BYTES_PER_PATCH = 2 * 8 + 2 * 8 + 4 * 8
_WORK_PER_PATCH = 60
# Per table value: its JSON text (at most 25 characters) and writing it (≈ 30 ns).
_BYTES_PER_VALUE = 25
_WORK_PER_VALUE = 40


def _grid(body: Mapping[str, Any]) -> tuple[int, int, int]:
    t, h, w = body["grid"]
    return int(t), int(h), int(w)


def _read(body: Mapping[str, Any], max_values: int) -> tuple[VisionRope, tuple[int, int, int], int]:
    try:
        vision = read(body["config"])
    except ParameterError as error:
        raise against_model_type(error) from None
    grid = _grid(body)
    patches = count(vision, grid)
    values = math.prod(tables.shape(vision, patches, body.get("component", "cos_sin")))
    if values + 2 * patches > max_values:
        raise LimitError(
            "grid",
            f"{patches} patches give {values} values and {2 * patches} ids, over the limit "
            f"of {max_values}",
        )
    return vision, grid, patches


def size(body: Mapping[str, Any], limits: Limits) -> Sized:
    """What the answer costs, from the grid's numbers alone."""
    vision, _, patches = _read(body, limits.max_values)
    recipe, dtype = body.get("recipe", "exact"), body.get("dtype", "float32")
    component = body.get("component", "cos_sin")
    values = math.prod(tables.shape(vision, patches, component))
    cost = tables.cost(vision, patches, recipe, dtype, component)
    cost += Cost(patches * _BYTES_PER_PATCH + SCRATCH, patches * _WORK_PER_PATCH)
    cost += Cost(values * _BYTES_PER_VALUE, values * _WORK_PER_VALUE)
    return Sized(cost, values + 2 * patches, "grid")


def answer(body: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    vision, grid, _ = _read(body, limits.max_values)
    recipe, dtype = body.get("recipe", "exact"), body.get("dtype", "float32")
    component = body.get("component", "cos_sin")
    ids = order(vision, grid)
    table = tables.encode(vision, ids, recipe, dtype, component)
    axis, frequency = tables.columns(vision)
    rope = dataclasses.asdict(tables.rope_of(vision, recipe))
    return {
        "scheme": "rope",
        "model_type": vision.model_type,
        "vision": {
            **vision.describe(),
            "axis": axis.tolist(),
            "frequency": frequency.tolist(),
            "rope": {k: v for k, v in rope.items() if v is not None},
        },
        "grid": list(grid),
        "component": component,
        "shape": list(table.shape),
        "table": table,
        "positions": ids,
    }
