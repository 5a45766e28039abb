"""What ``POST /v1/rope/applied`` takes and answers, for the OpenAPI document: its parts, its
query parameters (the rope's own, read off :class:`~posenc.schemes.rope.params.RopeParams` as
``GET /v1/rope/table`` takes them, and where the rope sits in the arrays) and its answer."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from posenc.declare import FileParam, QueryParam, choices, hints, spec
from posenc.numerics.exact import MAX_POSITION
from posenc.schemes.rope.applied.expected import UNSTATED
from posenc.schemes.rope.params import RopeParams

_ARRAY = (
    "a .npy file (float16, float32, float64; bfloat16 as ml_dtypes writes it, two-byte void "
    "values) or raw little-endian values with part headers X-Array-Shape (e.g. 4096,32,128) and "
    "X-Array-Dtype (float16, bfloat16, float32, float64)"
)
FILES = (
    FileParam("before", f"the query or key vectors given to the kernel: {_ARRAY}", True),
    FileParam("after", f"what the kernel returned, the same shape: {_ARRAY}", True),
    FileParam(
        "positions",
        "int32 or int64 ids (.npy, or raw with part headers): (n,) one a token of the token "
        "axis, or M-RoPE's (3, n); absent: offset, offset + 1, …",
    ),
)


def _schema(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """A RopeParams field as the JSON Schema of a query value."""
    hint = hints(RopeParams)[f.name]
    allowed = choices(hint)
    if allowed is not None:
        return {"type": "string", "enum": list(allowed)}
    limits = spec(f)
    bounds = {
        key: value
        for key, value in (
            ("minimum", limits.ge),
            ("exclusiveMinimum", limits.gt),
            ("maximum", limits.le),
            ("exclusiveMaximum", limits.lt),
        )
        if value is not None
    }
    (kind,) = [arg for arg in (typing.get_args(hint) or (hint,)) if arg is not type(None)]
    if typing.get_origin(kind) is tuple:
        sized = {"minItems": limits.min_items, "maxItems": limits.max_items}
        return {"type": "array", "items": {"type": "number", **bounds}, **sized}
    if kind is bool:
        return {"type": "boolean"}
    return {"type": "integer" if kind is int else "number", **bounds}


ROPE_QUERY = tuple(
    QueryParam(
        f.name,
        _schema(f),
        f"without a config part: {spec(f).doc}"
        + (" (required then)" if f.default is dataclasses.MISSING else ""),
    )
    for f in dataclasses.fields(RopeParams)
    if f.name not in UNSTATED
)
PLACING = (
    QueryParam(
        "layer",
        {"type": "integer", "minimum": 0, "maximum": 1_000_000},
        "with a config part: the layer whose rope is expected, as POST /v1/rope/config "
        "numbers them (default 0)",
    ),
    QueryParam(
        "head_dim",
        {"type": "integer", "minimum": 2, "maximum": 1 << 20},
        "the width of one head, where the last axis holds several (heads × head_dim); default: "
        "the last axis is one head",
    ),
    QueryParam(
        "token_axis",
        {"type": "integer", "minimum": 0, "maximum": 4},
        "the axis of the tokens, which positions numbers (default 0); every other axis but the "
        "head's is more samples at the same positions",
    ),
    QueryParam(
        "offset",
        {"type": "integer", "minimum": 0, "maximum": MAX_POSITION},
        "without a positions part: the first token's position (default 0)",
    ),
    QueryParam(
        "rotary_offset",
        {"type": "integer", "minimum": 0, "maximum": 1 << 20},
        "without a config part: the first dimension of the head that turns (default 0); the "
        "head's other dimensions must come out unchanged",
    ),
)
QUERY = ROPE_QUERY + PLACING

_FINDING = {
    "type": "object",
    "required": ["name", "detail", "evidence"],
    "properties": {
        "name": {
            "type": "string",
            "description": "pairing_mismatch, not_a_rotation, reversed_rotation, "
            "double_rotation, partial_rotary, scaling_mismatch, base_mismatch, "
            "attention_factor_mismatch, offset_mismatch, angle_precision, "
            "collapsed_positions, mrope_section_mismatch, angles_mismatch",
        },
        "detail": {"type": "string"},
        "evidence": {"type": "object", "description": "fitted values, pairs, positions"},
    },
}
_NULLABLE_NUMBER = {"type": ["number", "null"]}
_ERRORS = {"type": "array", "items": _NULLABLE_NUMBER}
_MEASURED: dict[str, Any] = {
    "type": "object",
    "required": [
        "pairs",
        "rotated_dims",
        "magnitude",
        "recipe",
        "max_angle_error",
        "resolution",
        "angle_error_by_position",
        "angle_error_by_pair",
    ],
    "properties": {
        "tokens": {"type": "integer"},
        "samples": {"type": "integer", "description": "vectors a token: heads × batch"},
        "head_dim": {"type": "integer"},
        "dtypes": {"type": "object"},
        "pairs": {
            "type": ["string", "null"],
            "description": "the pairing that keeps every pair's length: split (i, i + d/2), "
            "interleaved (2i, 2i + 1) or interleaved_to_rotate_half; null: none does",
        },
        "lengths_kept": {
            "type": "object",
            "additionalProperties": {"type": "number"},
            "description": "each pairing's share of cells whose length one magnitude keeps",
        },
        "rotated_dims": {
            "type": ["array", "null"],
            "items": {"type": "integer"},
            "description": "[first, last + 1] of the dimensions that turned or moved",
        },
        "magnitude": {**_NULLABLE_NUMBER, "description": "|after| / |before| of the turned pairs"},
        "recipe": {
            "type": ["string", "null"],
            "enum": ["exact", "framework", "ggml", "mlx", None],
            "description": "the recipe whose angles (and, where holds, lengths) are within the "
            "resolution at every cell",
        },
        "also_within": {"type": "array", "items": {"type": "string"}},
        "recipes": {
            "type": "object",
            "description": "each recipe: holds, angles_hold, lengths_hold, max_angle_error; or "
            "holds null with the reason it has no such rope",
        },
        "max_angle_error": {
            **_NULLABLE_NUMBER,
            "description": "radians, against the recipe named (else exact)",
        },
        "resolution": {
            **_NULLABLE_NUMBER,
            "description": "radians: the median cell's angle resolution from the dtypes",
        },
        "positions": {"type": "array", "items": {"type": "integer"}},
        "angle_error_by_position": {**_ERRORS, "description": "largest error of each position "
                                    "(bins of positions, each starting at positions[k])"},
        "angle_error_by_pair": _ERRORS,
        "angle_error_map": {
            "type": ["object", "null"],
            "description": "positions × pairs, binned: positions and pairs are each bin's first",
        },
    },
}  # fmt: skip
ANSWER_SCHEMA: dict[str, Any] = {
    "required": ["holds", "reason", "expected", "measured", "diagnosis"],
    "properties": {
        "holds": {
            "type": ["boolean", "null"],
            "description": "true: the model's rope (pairs, dims, frequencies, scaling, "
            "attention factor, positions) within the resolution of the dtypes, under one "
            "recipe; null where the data cannot decide (reason)",
        },
        "reason": {"type": ["string", "null"]},
        "expected": {
            "type": "object",
            "description": "params (the rope's canonical parameters; null for a NoPE layer), "
            "layer, rotary_offset, pairs, apply, mrope",
        },
        "measured": _MEASURED,
        "diagnosis": {"type": "array", "items": _FINDING},
    },
}
