"""The JSON schemas of ``POST /v1/rope/vision``: what the OpenAPI document publishes, and what
every body is held to before it is read."""

from __future__ import annotations

from typing import Any

from posenc.schemes.rope.vision.families import UNANSWERED, VISION_FAMILIES

BODY_SCHEMA: dict[str, Any] = {
    "description": "a model's config.json and the patch grid of one image or video",
    "required": ["config", "grid"],
    "additionalProperties": False,
    "properties": {
        "config": {
            "type": "object",
            "required": ["model_type"],
            "additionalProperties": True,
            "properties": {
                "model_type": {"type": "string"},
                "vision_config": {"type": ["object", "null"], "additionalProperties": True},
            },
            "description": "config.json; model_type one of "
            + ", ".join(sorted(VISION_FAMILIES))
            + ", or any whose vision_config.model_type is pixtral (not yet: "
            + ", ".join(sorted(UNANSWERED))
            + ")",
        },
        "grid": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 2**20},
            "minItems": 3,
            "maxItems": 3,
            "description": "[t, h, w]: the patch grid (image_grid_thw); Pixtral: t images of "
            "h × w patches; Llama 4: [1, s, s], its own image_size / patch_size",
        },
        "component": {
            "type": "string",
            "enum": ["cos_sin", "cos", "sin", "angle"],
            "description": "cos_sin (2, n, head_dim), cos or sin (n, head_dim) in the tower's "
            "layout, angle (n, head_dim/2); default cos_sin",
        },
        "recipe": {
            "type": "string",
            "enum": ["exact", "framework"],
            "description": "exact (default: rounded once) or framework: the tower's rotary "
            "module in float32, operation by operation",
        },
        "dtype": {"type": "string", "enum": ["float32", "float64"]},
    },
    "examples": [{"config": {"model_type": "qwen2_vl"}, "grid": [1, 4, 6]}],
}
_VISION: dict[str, Any] = {
    "type": "object",
    "required": [
        "family",
        "head_dim",
        "theta",
        "layout",
        "spatial_merge_size",
        "window",
        "side",
        "axis",
        "frequency",
        "rope",
    ],
    "additionalProperties": False,
    "properties": {
        "family": {"type": "string", "enum": ["qwen", "kimi", "pixtral", "llama4"]},
        "head_dim": {"type": "integer"},
        "theta": {"type": "number"},
        "layout": {
            "type": "string",
            "enum": ["split", "interleaved"],
            "description": "split: pairs (i, i + d/2), rotate_half; interleaved: complex pairs "
            "(2i, 2i+1) (Llama 4's freqs_ci)",
        },
        "spatial_merge_size": {
            "type": ["integer", "null"],
            "description": "the merge blocks that order the patches (Qwen, GLM; 1, raster "
            "order, for PaddleOCR-VL and Kimi)",
        },
        "window": {
            "type": ["integer", "null"],
            "description": "Qwen2.5-VL: merge blocks a side of an attention window "
            "(window_size / spatial_merge_size / patch_size), whose order the patches take",
        },
        "side": {
            "type": ["integer", "null"],
            "description": "Llama 4: patches a side of its one grid",
        },
        "axis": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "per pair: 0 turns by the row (h), 1 by the column (w)",
        },
        "frequency": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "per pair: the index i of its frequency base^(-2i/d_model) in rope",
        },
        "rope": {
            "type": "object",
            "description": "the one-dimensional rope whose frequencies the tower uses, as "
            "/v1/rope/table takes it",
        },
    },
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": [
        "scheme",
        "model_type",
        "vision",
        "grid",
        "component",
        "shape",
        "table",
        "positions",
    ],
    "additionalProperties": False,
    "properties": {
        "scheme": {"type": "string"},
        "model_type": {"type": "string"},
        "vision": _VISION,
        "grid": {"type": "array", "items": {"type": "integer"}},
        "component": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer"}},
        "table": {
            "type": "array",
            "description": "the component, one row per patch in the order the tower's "
            "attention sees them",
        },
        "positions": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}},
            "description": "per patch, in that order: the (row, column) ids its rope turns by "
            "(Llama 4: counted from 1, its CLS token last at (0, 0))",
        },
    },
}
