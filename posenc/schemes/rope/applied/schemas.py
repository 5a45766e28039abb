"""What ``POST /v1/rope/applied`` takes and answers, for the OpenAPI document: its parts, its
query parameters (the rope's own, read off :class:`~posenc.schemes.rope.params.RopeParams` as
``GET /v1/rope/table`` takes them, and where the rope sits in the arrays) and its answer."""

from __future__ import annotations

import dataclasses
from typing import Any

from posenc.declare import FileParam, QueryParam, spec
from posenc.numerics.exact import MAX_POSITION
from posenc.schemes.rope.applied.angles import RECIPES
from posenc.schemes.rope.applied.expected import UNSTATED
from posenc.schemes.rope.applied.reader import FLOATS
from posenc.schemes.rope.mrope.schemas import MROPE_SCHEMA
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.schemas import params_schema, value_schema

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


ROPE_QUERY = tuple(
    QueryParam(
        f.name,
        value_schema(f),
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

_NUMBER: dict[str, Any] = {"type": "number"}
_NULLABLE_NUMBER: dict[str, Any] = {"type": ["number", "null"]}
_INTEGER: dict[str, Any] = {"type": "integer"}
_INTEGERS: dict[str, Any] = {"type": "array", "items": _INTEGER}
_ERRORS: dict[str, Any] = {"type": "array", "items": _NULLABLE_NUMBER}
# [first, last] (or [first, last + 1] where the description says so).
_SPAN: dict[str, Any] = {**_INTEGERS, "minItems": 2, "maxItems": 2}
_RUNS: dict[str, Any] = {"type": "array", "items": _SPAN, "description": "[first, last] runs"}
_PAIRINGS = ("split", "interleaved", "interleaved_to_rotate_half")
_SHARES: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {pairing: _NUMBER for pairing in _PAIRINGS},
    "description": "each pairing tried: the share of cells whose length one magnitude keeps",
}
_SCALINGS = value_schema(next(f for f in dataclasses.fields(RopeParams) if f.name == "scaling"))
_RECIPE_NAME: dict[str, Any] = {"type": "string", "enum": list(RECIPES)}
FINDINGS = (
    "pairing_mismatch", "not_a_rotation", "reversed_rotation", "double_rotation",
    "partial_rotary", "scaling_mismatch", "base_mismatch", "attention_factor_mismatch",
    "offset_mismatch", "angle_precision", "collapsed_positions", "mrope_section_mismatch",
    "table_precision", "angles_mismatch",
)  # fmt: skip
# Every member a finding's evidence may hold, by the findings that give it.
_EVIDENCE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "what the finding read: the fitted and stated values, pairs, dimensions and "
    "positions (each member below says which findings give it); a fault found by fitting "
    "also names the recipe it fits under and its largest angle error",
    "properties": {
        "measured": {"type": "string", "enum": list(_PAIRINGS), "description": "pairing_mismatch"},
        "expected": {"type": "string", "enum": list(_PAIRINGS), "description": "pairing_mismatch"},
        "lengths_kept": {
            "anyOf": [_SHARES, _NUMBER],
            "description": "pairing_mismatch, not_a_rotation, partial_rotary, table_precision "
            "(to the data's resolution): each pairing's share of cells that keep one length; "
            "not_a_rotation in the pairs the model turns: the share itself",
        },
        "table_dtype": {
            "type": "string",
            "enum": ["bfloat16", "float16", "float32"],
            "description": "table_precision: the type every cell's cos and sin are values of",
        },
        "values_on_grid": {
            **_INTEGER,
            "description": "table_precision: the cells' cos and sin that test the type's grid "
            "(its spacing far above the data's rounding), every one on it",
        },
        "magnitude": {**_NULLABLE_NUMBER, "description": "not_a_rotation"},
        "moved_dimensions": {**_RUNS, "description": "partial_rotary: dimensions that moved"},
        "rotary_dims": {**_SPAN, "description": "partial_rotary: the model's [first, last + 1]"},
        "measured_dims": {**_SPAN, "description": "partial_rotary: [first, last + 1] turned"},
        "measured_pairs": {"type": "string", "enum": list(_PAIRINGS)},
        "still_pairs": {**_RUNS, "description": "partial_rotary: pairs that came out unchanged"},
        "turning_pairs": {**_INTEGER, "description": "partial_rotary: pairs that turned"},
        "head_dim": {**_INTEGER, "description": "partial_rotary: the head the exponent is over"},
        "rotating_dimensions": _INTEGER,
        "partial_rotary_factor": _NUMBER,
        "times": {**_INTEGER, "description": "reversed_rotation (−1), double_rotation"},
        "positions_dtype": {"type": "string", "enum": ["bfloat16", "float16"]},
        "moved_tokens": {**_INTEGER, "description": "collapsed_positions"},
        "collapsed_rows": {**_INTEGER, "description": "collapsed_positions"},
        "first_collapsed_position": _INTEGER,
        "examples": {
            "type": "array",
            "items": _SPAN,
            "description": "collapsed_positions: [position, position it was turned as]",
        },
        "shift": {**_INTEGER, "description": "offset_mismatch"},
        "stated_first_position": _INTEGER,
        "fitted_first_position": _INTEGER,
        "pairs": {**_INTEGERS, "description": "mrope_section_mismatch: the pairs (first 64)"},
        "measured_rows": {**_INTEGERS, "description": "0 temporal, 1 height, 2 width"},
        "expected_rows": _INTEGERS,
        "pairs_by_id": {
            "type": "object",
            "required": ["temporal", "height", "width"],
            "additionalProperties": False,
            "properties": {"temporal": _INTEGER, "height": _INTEGER, "width": _INTEGER},
        },
        "implied_bits": {**_NUMBER, "description": "angle_precision"},
        "largest_relative_error": _NUMBER,
        "from_position": _INTEGER,
        "fitted_factor": {
            **_NULLABLE_NUMBER,
            "description": "attention_factor_mismatch; scaling_mismatch (null: no factor)",
        },
        "expected_factor": _NUMBER,
        "ratio": _NUMBER,
        "fitted_base": {**_NUMBER, "description": "base_mismatch, partial_rotary"},
        "stated_base": _NUMBER,
        "pairs_read": {**_SPAN, "description": "the pairs the frequencies were read from"},
        "pairs_count": _INTEGER,
        "fitted_scaling": _SCALINGS,
        "fitted_original_max_position_embeddings": {"type": ["integer", "null"]},
        "stated_scaling": _SCALINGS,
        "stated_factor": _NULLABLE_NUMBER,
        "max_angle_error": {**_NULLABLE_NUMBER, "description": "angles_mismatch, radians"},
        "recipes": {"type": "array", "items": _RECIPE_NAME, "description": "angles_mismatch"},
        "recipe": {**_RECIPE_NAME, "description": "the recipe a fault's turning fits under"},
        "max_angle_error_as_fitted": _NULLABLE_NUMBER,
    },
}
_FINDING: dict[str, Any] = {
    "type": "object",
    "required": ["name", "detail", "evidence"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "enum": list(FINDINGS)},
        "detail": {"type": "string"},
        "evidence": _EVIDENCE,
    },
}
_EXPECTED: dict[str, Any] = {
    "type": "object",
    "required": ["params", "layer", "rotary_offset", "pairs", "apply", "mrope"],
    "additionalProperties": False,
    "properties": {
        "params": {
            "anyOf": [{"type": "null"}, params_schema(UNSTATED)],
            "description": "the rope's canonical parameters, the GET parameters of "
            "/v1/rope/table (no recipe: every recipe is tried); null for a NoPE layer",
        },
        "layer": {
            "type": ["integer", "null"],
            "description": "the config's layer; null: the rope came in the query",
        },
        "rotary_offset": {**_INTEGER, "description": "the first dimension of the head that turns"},
        "pairs": {
            "type": "string",
            "enum": ["split", "interleaved"],
            "description": "the pairs the model turns q and k in",
        },
        "apply": {
            "type": ["string", "null"],
            "enum": ["reversed", "interleaved_to_rotate_half", None],
            "description": "how the model's family applies the rope where not plainly: by −θ "
            "(reversed), or read interleaved and written split (interleaved_to_rotate_half)",
        },
        "mrope": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["rotary", "section"],
                    "additionalProperties": False,
                    "properties": {
                        "rotary": MROPE_SCHEMA["properties"]["rotary"],
                        "section": _INTEGERS,
                    },
                },
            ],
            "description": "M-RoPE: how the pairs take the three ids, and the sections",
        },
    },
}
_FIT: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "required": ["holds", "angles_hold", "lengths_hold", "max_angle_error"],
            "additionalProperties": False,
            "properties": {
                "holds": {"type": "boolean"},
                "angles_hold": {"type": "boolean"},
                "lengths_hold": {"type": "boolean"},
                "max_angle_error": _NULLABLE_NUMBER,
            },
        },
        {
            "type": "object",
            "required": ["holds", "reason"],
            "additionalProperties": False,
            "properties": {"holds": {"type": "null"}, "reason": {"type": "string"}},
        },
    ]
}
_DTYPE: dict[str, Any] = {"type": "string", "enum": list(FLOATS)}
_MEASURED_MEMBERS: dict[str, Any] = {
    "tokens": _INTEGER,
    "samples": {**_INTEGER, "description": "vectors a token: heads × batch"},
    "head_dim": _INTEGER,
    "dtypes": {
        "type": "object",
        "required": ["before", "after"],
        "additionalProperties": False,
        "properties": {"before": _DTYPE, "after": _DTYPE},
    },
    "pairs": {
        "type": ["string", "null"],
        "enum": [*_PAIRINGS, None],
        "description": "the pairing that keeps every pair's length: split (i, i + d/2), "
        "interleaved (2i, 2i + 1) or interleaved_to_rotate_half; null: none does",
    },
    "lengths_kept": _SHARES,
    "rotated_dims": {
        "anyOf": [{"type": "null"}, _SPAN],
        "description": "[first, last + 1] of the dimensions that turned or moved",
    },
    "magnitude": {**_NULLABLE_NUMBER, "description": "|after| / |before| of the turned pairs"},
    "recipe": {
        "type": ["string", "null"],
        "enum": [*RECIPES, None],
        "description": "the recipe whose angles (and, where holds, lengths) are within the "
        "resolution at every cell",
    },
    "also_within": {"type": "array", "items": _RECIPE_NAME},
    "recipes": {
        "type": "object",
        "additionalProperties": False,
        "properties": {recipe: _FIT for recipe in RECIPES},
        "description": "each recipe held to the cells: whether its angles and lengths hold and "
        "its largest angle error; or holds null with the reason it has no such rope (empty "
        "where nothing was measured)",
    },
    "max_angle_error": {
        **_NULLABLE_NUMBER,
        "description": "radians, against the recipe named (else exact)",
    },
    "resolution": {
        **_NULLABLE_NUMBER,
        "description": "radians: the median cell's angle resolution from the dtypes",
    },
    "positions": {
        **_INTEGERS,
        "description": "the first position of each bin of angle_error_by_position",
    },
    "angle_error_by_position": {
        **_ERRORS,
        "description": "largest error of each position (bins of positions, each starting at "
        "positions[k]); null where nothing was read",
    },
    "angle_error_by_pair": _ERRORS,
    "angle_error_map": {
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "required": ["positions", "pairs", "values"],
                "additionalProperties": False,
                "properties": {
                    "positions": _INTEGERS,
                    "pairs": _INTEGERS,
                    "values": {"type": "array", "items": _ERRORS},
                },
            },
        ],
        "description": "positions × pairs, binned: positions and pairs are each bin's first; "
        "values[i][j] the largest error in bin i of positions and j of pairs",
    },
}
_MEASURED: dict[str, Any] = {
    "type": "object",
    "required": list(_MEASURED_MEMBERS),
    "additionalProperties": False,
    "properties": _MEASURED_MEMBERS,
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": ["holds", "reason", "expected", "measured", "diagnosis"],
    "additionalProperties": False,
    "properties": {
        "holds": {
            "type": ["boolean", "null"],
            "description": "true: the model's rope (pairs, dims, frequencies, scaling, "
            "attention factor, positions) within the resolution of the dtypes, under one "
            "recipe; null where the data cannot decide (reason)",
        },
        "reason": {"type": ["string", "null"]},
        "expected": _EXPECTED,
        "measured": _MEASURED,
        "diagnosis": {"type": "array", "items": _FINDING},
    },
}
