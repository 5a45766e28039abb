"""What the document says of ``POST /v1/rope/config``: the fields of a config.json it reads
(its body), and its answer."""

from __future__ import annotations

import dataclasses
from typing import Any

from posenc.schemes.rope.models.params import NUMBERS, PROPORTIONAL, SCALINGS
from posenc.schemes.rope.mrope.schemas import MROPE_SCHEMA
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.schemas import params_schema, value_schema

_NUMBER = {"type": "number"}


def _ranged(name: str) -> dict[str, Any]:
    """A scaling number as RopeParams declares its range: one source, so that a config the
    schema admits is never refused for a range the schema did not state. A null is read as a
    key left out, as transformers reads it."""
    ranged = value_schema(next(f for f in dataclasses.fields(RopeParams) if f.name == name))
    return {**ranged, "type": [ranged["type"], "null"]}


# xdrope: HunYuan-VL's checkpoints' name for its rope type, read as dynamic.
_ROPE_TYPES = sorted({*SCALINGS, PROPORTIONAL, "mrope", "xdrope"})
_SECTIONS: dict[str, Any] = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1, "maximum": 65536},
    "minItems": 3,
    "maxItems": 4,
}
_ROPE: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "rope_type": {"type": "string", "enum": _ROPE_TYPES},
        "type": {"type": "string", "enum": _ROPE_TYPES},
        # Read by POST /v1/rope/positions and for the answer's mrope, of M-RoPE models only;
        # HunYuan-VL's (xdrope_section in its checkpoints) has 3 or 4 axes.
        "mrope_section": _SECTIONS,
        "xdrope_section": _SECTIONS,
        # HunYuan's fixed stretch of the base (with rope_type dynamic or xdrope).
        "alpha": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "mrope_interleaved": {"type": ["boolean", "null"]},
        "interleaved": {"type": ["boolean", "null"]},
        "rope_theta": {"type": ["number", "null"], "exclusiveMinimum": 1, "maximum": 1e12},
        "partial_rotary_factor": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": 1,
        },
        "original_max_position_embeddings": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 2**31 - 1,
        },
        "truncate": {"type": "boolean"},
        # Read and reported (Llama 4's query scaling) or ignored (as transformers' validation
        # does): neither changes cos/sin.
        "llama_4_scaling_beta": {"type": ["number", "null"], "minimum": 0, "maximum": 1e6},
        "max_position_embeddings": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 2**31 - 1,
        },
        "short_factor": {
            "type": ["array", "null"],
            "items": {**_ranged("short_factor"), "type": "number"},
        },
        "long_factor": {
            "type": ["array", "null"],
            "items": {**_ranged("long_factor"), "type": "number"},
        },
        **{name: _ranged(name) for name in NUMBERS},
    },
}
# What the document says of a config.json: the fields read, and a real one as the example.
# A rope_parameters keyed by layer type (transformers 5's per-layer form): a rope per type.
_PER_LAYER_TYPE: dict[str, Any] = {
    "type": "object",
    "description": "one rope per layer type of layer_types; null: that type's layers have none "
    "(Beam, Cohere-Compass)",
    "additionalProperties": _ROPE,
}
BODY_SCHEMA: dict[str, Any] = {
    "description": "a model's config.json (transformers) or a multimodal model's, whose text "
    "model's config is read from text_config; the fields typed here, and those API.md §6.3 "
    "names (layer_types, no_rope_layers, the family's own keys)",
    "type": "object",
    # Said, not left implicit: a generated client then takes a config.json's other keys
    # (openapi-typescript types an object without it as closed, refusing model_type).
    "additionalProperties": True,
    "properties": {
        "head_dim": {"type": ["integer", "null"], "minimum": 2, "maximum": 65536},
        "hidden_size": {"type": ["integer", "null"], "minimum": 2, "maximum": 2**31 - 1},
        "num_attention_heads": {"type": ["integer", "null"], "minimum": 1, "maximum": 65536},
        "rope_theta": {"type": ["number", "null"], "exclusiveMinimum": 1, "maximum": 1e12},
        "rope_scaling": _ROPE,
        "rope_parameters": {"anyOf": [_ROPE, _PER_LAYER_TYPE]},
        "partial_rotary_factor": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
        "max_position_embeddings": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 2**31 - 1,
        },
    },
    "examples": [
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": None,
        }
    ],
}
_SEQ_LEN: dict[str, Any] = {
    "type": "object",
    "description": "the positions the table and verify URLs ask for: "
    "max_position_embeddings (else 4096), or fewer where the service's limits "
    "(POSENC_MAX_ELEMENTS, POSENC_MAX_WORK, POSENC_MEMORY_BYTES) would refuse that many; "
    "0 when they refuse even one row, and that URL is left out",
    "required": ["table", "verify"],
    "properties": {"table": {"type": "integer"}, "verify": {"type": "integer"}},
}
_URLS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "description": "table (exact), table_framework (transformers' float32), table_ggml and "
    "table_mlx (llama.cpp's and MLX's, where that runtime implements the rope), verify, and "
    "their /v1/table and /v1/verify aliases; each as many rows as the service's limits serve",
}
_ROPE_ANSWER: dict[str, Any] = {
    "type": "object",
    "required": [
        "layer_types",
        "layers",
        "params",
        "rotary_dim",
        "rotary_offset",
        "partial_rotary_factor",
        "apply",
        "query_scaling",
        "seq_len",
        "urls",
    ],
    "additionalProperties": False,
    "properties": {
        "layer_types": {"type": "array", "items": {"type": "string"}},
        "layers": {
            "type": ["array", "null"],
            "items": {"type": "integer"},
            "description": "the layers that apply this rope; null when the config does not "
            "say how many layers the model has",
        },
        "params": {**params_schema(), "description": "the canonical GET parameters"},
        "rotary_dim": {
            "type": "integer",
            "description": "the dimensions that turn: params.d_model, or 2·rotary_pairs for "
            "a proportional rope (its cache spans the head; the other pairs hold still)",
        },
        "rotary_offset": {
            "type": "integer",
            "minimum": 0,
            "description": "where in each head the rope sits: the first dimension that turns. "
            "The rope turns dimensions rotary_offset … rotary_offset + rotary_dim − 1 of the "
            "head and leaves the others still; 0 for a rope over the head's leading dimensions "
            "(almost every model), head_dim − rotary_dim for one over its trailing dimensions "
            "(DeepSeek-V4's qk_rope_head_dim, llama.cpp's ggml_rope_set_offset)",
        },
        "partial_rotary_factor": _NUMBER,
        "apply": {
            "type": ["string", "null"],
            "enum": ["interleaved", "interleaved_to_rotate_half", "reversed", None],
            "description": "the pairs q and k turn in, where the model's apply call re-lays "
            "the cache (params.layout) before rotating: interleaved = (2i, 2i+1); "
            "interleaved_to_rotate_half = pairs (2i, 2i+1) of q/k turned and written to "
            "(i, i + d/2), DeepSeek's rope_interleave; reversed = the cache's own pairs turned "
            "the other way, by −θ (its sin negated), NanoChat's",
        },
        "query_scaling": {
            "type": ["object", "null"],
            "description": "Llama 4's scaling of q by 1 + β·ln(1 + ⌊p / L⌋), applied beside "
            "the rope (not in its cos/sin)",
            "additionalProperties": _NUMBER,
        },
        "seq_len": _SEQ_LEN,
        "urls": _URLS,
    },
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": [
        "scheme",
        "model_type",
        "text_config",
        "num_hidden_layers",
        "head_dim",
        "max_position_embeddings",
        "ropes",
        "nope_layers",
        "mrope",
    ],
    "additionalProperties": False,
    "properties": {
        "scheme": {"type": "string"},
        "model_type": {"type": ["string", "null"]},
        "text_config": {
            "type": ["string", "null"],
            "description": "where the config of the model the rope turns was found, for a "
            "multimodal model (its text model's; an audio encoder's where it has no text model)",
        },
        "num_hidden_layers": {"type": ["integer", "null"]},
        "head_dim": {"type": "integer"},
        "max_position_embeddings": {"type": ["integer", "null"]},
        "ropes": {
            "type": "array",
            "items": _ROPE_ANSWER,
            "description": "every rope of the model; every layer is in one rope's layers or "
            "in nope_layers",
        },
        "nope_layers": {"type": "array", "items": {"type": "integer"}},
        "mrope": {
            "anyOf": [{"type": "null"}, MROPE_SCHEMA],
            "description": "multimodal rope (M-RoPE): how the three ids of a token share the "
            "frequencies, and the vision merge sizes POST /v1/rope/positions reads; null unless "
            "model_type is a multimodal model's whose M-RoPE is modelled (a text model read on "
            "its own, and HunYuan-VL, get null)",
        },
        "params": {**params_schema(), "description": "a model with one rope: its parameters"},
        "rotary_dim": {"type": "integer"},
        "partial_rotary_factor": _NUMBER,
        "seq_len": _SEQ_LEN,
        "urls": _URLS,
    },
}
