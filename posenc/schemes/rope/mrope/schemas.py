"""The JSON schemas of ``POST /v1/rope/positions`` and ``…/positions/verify``: what the
OpenAPI document publishes, and what every body is held to before it is read."""

from __future__ import annotations

from typing import Any

from posenc.schemes.rope.mrope.families import MROPE_FAMILIES, UNANSWERED

MROPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "section",
        "section_from",
        "interleaved",
        "rotary",
        "video",
        "spatial_merge_size",
        "temporal_merge_size",
        "tokens_per_second",
        "position_id_per_seconds",
    ],
    "additionalProperties": False,
    "properties": {
        "section": {"type": "array", "items": {"type": "integer"}},
        "section_from": {"type": ["string", "null"]},
        "interleaved": {"type": "boolean"},
        "rotary": {"type": "string", "enum": ["chunked", "interleaved", "glm_pairs", "ernie"]},
        "video": {"type": "string", "enum": ["block", "per_frame", "none"]},
        "spatial_merge_size": {"type": "integer"},
        "temporal_merge_size": {"type": ["integer", "null"]},
        "tokens_per_second": {"type": ["number", "null"]},
        "position_id_per_seconds": {"type": ["number", "null"]},
    },
}


_SMALL = {"minimum": 1, "maximum": 64}
# Where a rope dict keeps the sections (flat; per layer type, each type's is read too).
_ROPE_DICT = {
    "type": ["object", "null"],
    "additionalProperties": True,
    "properties": {
        "mrope_section": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 65536},
            "minItems": 3,
            "maxItems": 3,
        }
    },
}
_RATE = {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1e6}
_VISION = {
    "type": ["object", "null"],
    "additionalProperties": True,
    "properties": {
        "spatial_merge_size": {"type": ["integer", "null"], **_SMALL},
        "temporal_merge_size": {"type": ["integer", "null"], **_SMALL},
        "tokens_per_second": _RATE,
    },
}
_TEXT = {
    "type": ["object", "null"],
    "additionalProperties": True,
    "properties": {"rope_parameters": _ROPE_DICT, "rope_scaling": _ROPE_DICT},
}
_GRID = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1, "maximum": 2**20},
    "minItems": 3,
    "maxItems": 3,
    "description": "[t, h, w]: the patch grid before the spatial merge (image_grid_thw)",
}
_SEGMENT = {
    "anyOf": [
        {
            "type": "object",
            "required": ["text"],
            "additionalProperties": False,
            "properties": {
                "text": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
            },
        },
        {
            "type": "object",
            "required": ["image"],
            "additionalProperties": False,
            "properties": {"image": _GRID},
        },
        {
            "type": "object",
            "required": ["video"],
            "additionalProperties": False,
            "properties": {
                "video": _GRID,
                "second_per_grid_t": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
                "frame_prefix": {"type": "integer", "minimum": 0, "maximum": 2**20},
                "frame_suffix": {"type": "integer", "minimum": 0, "maximum": 2**20},
            },
        },
    ]
}
_SEGMENTS = {"type": "array", "items": _SEGMENT, "minItems": 1}
BODY_SCHEMA: dict[str, Any] = {
    "description": "a multimodal model's config.json and the layout of one sequence "
    "(segments) or of several (sequences), each with its own ids",
    "required": ["config"],
    "additionalProperties": False,
    "properties": {
        "config": {
            "type": "object",
            "required": ["model_type"],
            "additionalProperties": True,
            "properties": {
                "model_type": {"type": "string", "enum": sorted({*MROPE_FAMILIES, *UNANSWERED})},
                "vision_config": _VISION,
                "text_config": _TEXT,
                "thinker_config": {
                    "type": ["object", "null"],
                    "additionalProperties": True,
                    "properties": {
                        "vision_config": _VISION,
                        "text_config": _TEXT,
                        "position_id_per_seconds": _RATE,
                    },
                },
                "rope_parameters": _ROPE_DICT,
                "rope_scaling": _ROPE_DICT,
            },
            "description": "config.json; model_type one of "
            + ", ".join(sorted(MROPE_FAMILIES.keys() - UNANSWERED.keys()))
            + " (not yet: "
            + ", ".join(sorted(UNANSWERED))
            + ")",
        },
        "segments": _SEGMENTS,
        "sequences": {"type": "array", "items": _SEGMENTS, "minItems": 1},
        "component": {
            "type": "string",
            "enum": ["cos_sin", "cos", "sin", "angle"],
            "description": "also the table the model applies for the ids, of the config's "
            "text rope: cos_sin (2, n, d), cos or sin (n, d), angle (n, d/2)",
        },
        "recipe": {"type": "string", "enum": ["exact", "framework"]},
        "dtype": {"type": "string", "enum": ["float32", "float64"]},
    },
    "examples": [
        {
            "config": {"model_type": "qwen2_vl"},
            "segments": [{"text": 5}, {"image": [1, 8, 12]}, {"text": 7}],
        }
    ],
}
_IDS = {
    "type": "array",
    "items": {"type": "array", "items": {"type": "integer"}},
    "minItems": 3,
    "maxItems": 3,
    "description": "temporal, height and width ids: one column per token",
}
_SEQUENCE: dict[str, Any] = {
    "type": "object",
    "required": ["tokens", "position_ids", "next_position_delta"],
    "additionalProperties": False,
    "properties": {
        "tokens": {"type": "integer"},
        "position_ids": _IDS,
        "next_position_delta": {
            "type": "integer",
            "description": "get_rope_index's mrope_position_deltas: what decoding adds to "
            "later positions",
        },
        "table": {
            "type": "array",
            "description": "the component asked, for these ids (only when component is given)",
        },
    },
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": ["scheme", "model_type", "mrope", "params"],
    "additionalProperties": False,
    "properties": {
        "scheme": {"type": "string"},
        "model_type": {"type": "string"},
        "mrope": MROPE_SCHEMA,
        "params": {
            "anyOf": [{"type": "null"}, {"type": "object"}],
            "description": "the text rope the table is of, as /v1/rope/config gives it",
        },
        "sequences": {
            "type": "array",
            "items": _SEQUENCE,
            "description": "each sequence's ids, when sequences were given (segments: the "
            "ids stand at the top)",
        },
        **_SEQUENCE["properties"],
    },
}

# Ids are int32-sized (a sequence's ids never pass 2^31); wider would compare inexactly as
# JSON numbers.
_ID = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
VERIFY_BODY_SCHEMA: dict[str, Any] = {
    "description": "a multimodal model's config.json, a layout, and the client's position ids "
    "for it (packed: the sequences' ids one after the other), with decode_steps decoded "
    "tokens after one sequence's prompt",
    "required": ["config", "position_ids"],
    "additionalProperties": False,
    "properties": {
        **{key: BODY_SCHEMA["properties"][key] for key in ("config", "segments", "sequences")},
        "position_ids": {
            "anyOf": [
                {"type": "array", "items": _ID, "minItems": 1},
                {
                    "type": "array",
                    "items": {"type": "array", "items": _ID, "minItems": 1},
                    "minItems": 1,
                    "maxItems": 3,
                },
            ],
            "description": "(3, n) ids, or (n,) where a port used one row",
        },
        "decode_steps": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
    },
    "examples": [
        {
            "config": {"model_type": "qwen2_5_vl", "vision_config": {"tokens_per_second": 2}},
            "segments": [{"text": 1}, {"video": [4, 2, 2]}, {"text": 1}],
            # Text resumed at the video's largest id + 1, as transformers 4 did: diagnosed.
            "position_ids": [[0, 1, 3, 5, 7, 8], [0, 1, 1, 1, 1, 8], [0, 1, 1, 1, 1, 8]],
        }
    ],
}
_FINDING = {
    "type": "object",
    "required": ["name", "summary", "evidence"],
    "additionalProperties": False,
    "properties": {
        "name": {
            "type": "string",
            "enum": [
                "one_dimensional",
                "spatial_merge_missing",
                "length_mismatch",
                "text_resumes_at_max_plus_one",
                "height_width_swapped",
                "temporal_spacing",
                "packed_not_restarting",
                "decode_delta_missing",
            ],
        },
        "summary": {"type": "string"},
        "evidence": {"type": "object"},
    },
}
VERIFY_ANSWER_SCHEMA: dict[str, Any] = {
    "required": [
        "scheme",
        "model_type",
        "mrope",
        "equal",
        "tokens",
        "mismatched_tokens",
        "first_difference",
        "diagnosis",
    ],
    "additionalProperties": False,
    "properties": {
        "scheme": {"type": "string"},
        "model_type": {"type": "string"},
        "mrope": MROPE_SCHEMA,
        "equal": {"type": "boolean", "description": "the ids are the model's, every one"},
        "tokens": {"type": "integer", "description": "the layout's tokens and decode steps"},
        "mismatched_tokens": {"type": ["integer", "null"]},
        "first_difference": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["token", "segment", "expected", "got"],
                    "additionalProperties": False,
                    "properties": {
                        "token": {"type": "integer"},
                        "segment": {"anyOf": [{"type": "null"}, {"type": "object"}]},
                        "expected": {"type": "array", "items": {"type": "integer"}},
                        "got": {"type": "array", "items": {"type": "integer"}},
                    },
                },
            ]
        },
        "diagnosis": {"type": "array", "items": _FINDING},
    },
}
