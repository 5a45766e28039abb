"""The JSON Schemas of ``POST /v1/rope/gguf``'s query and answer, for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from posenc.declare import QueryParam
from posenc.schemes.rope.models import schemas as config_schemas
from posenc.schemes.rope.schemas import params_schema

N_CTX = QueryParam(
    "n_ctx",
    {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
    "the context llama.cpp runs with (llama_context_params.n_ctx; default the file's "
    "context_length): it chooses Phi-3's long or short factors, once padded to 256 as "
    "llama.cpp pads it",
)

_NUMBER: dict[str, Any] = {"type": "number"}
_INTEGERS: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
_GGML: dict[str, Any] = {
    "type": "object",
    "description": "the arguments of the layers' ggml_rope_ext (ggml_rope_multi with sections) "
    "as llama.cpp passes them, float32 values written exactly; freq_factors names the factor "
    "tensor (its values are params.freq_factors)",
    "required": [
        "n_dims",
        "mode",
        "n_ctx_orig",
        "freq_base",
        "freq_scale",
        "ext_factor",
        "attn_factor",
        "beta_fast",
        "beta_slow",
        "sections",
        "freq_factors",
    ],
    "additionalProperties": False,
    "properties": {
        "n_dims": {"type": "integer"},
        "mode": {"type": "integer", "enum": [0, 2, 8, 24, 40]},
        "n_ctx_orig": {"type": "integer"},
        "freq_base": _NUMBER,
        "freq_scale": _NUMBER,
        "ext_factor": _NUMBER,
        "attn_factor": _NUMBER,
        "beta_fast": _NUMBER,
        "beta_slow": _NUMBER,
        "sections": {"anyOf": [{"type": "null"}, _INTEGERS]},
        "freq_factors": {"type": ["string", "null"]},
    },
}
_ROPE: dict[str, Any] = {
    "type": "object",
    "required": ["layers", "rope_type", "applies_to", "params", "ggml", "read_from"],
    "additionalProperties": False,
    "properties": {
        "layers": _INTEGERS,
        "rope_type": {"type": "string", "enum": ["norm", "neox", "mrope", "imrope", "vision"]},
        "applies_to": {
            "type": "array",
            "items": {"type": "string"},
            "description": "what this call turns in those layers, as llama.cpp's graph names "
            "it: q and k of the attention; q alone where a layer reuses an earlier layer's k "
            "(Gemma 3n, Gemma 4); q_pe and k_pe, the rotated parts of multi-head latent "
            "attention (DeepSeek); indexer_q and indexer_k, a lightning indexer's, a second "
            "rope in the same layers (DeepSeek-V3.2, GLM-5); in a vision projector's 2-D rope, "
            "q:row, k:row or q:column, k:column, the half of each head one axis turns",
        },
        "params": {
            **params_schema(left_out=("recipe",)),
            "description": "the canonical GET parameters of /v1/rope/table whose recipe=ggml "
            "is what llama.cpp computes for these layers (freq_factors: the factor tensor "
            "llama.cpp divides each pair's angle by)",
        },
        "ggml": _GGML,
        "max_abs_difference": {
            "type": ["object", "null"],
            "required": ["positions", "exact", "transformers"],
            "additionalProperties": False,
            "properties": {
                "positions": {"type": "array", "items": {"type": "integer"}},
                "exact": {"type": "number"},
                "transformers": {"type": "number"},
            },
            "description": "with a config: the largest |cos − cos′| and |sin − sin′| of "
            "llama.cpp's table (recipe=ggml) against the model's exact table and transformers' "
            "float32 recipe for these layers, at the positions listed (the last before n_ctx, "
            "where float32 angles are coarsest): recipe noise, reported, not a finding; null "
            "where the two ropes differ in width, where llama.cpp's factors freeze pairs "
            "(Gemma 4's proportional rope, stated as rotary_pairs, which recipe=ggml does not "
            "serve), and for a rope that is not the attention's (an indexer's: the model's "
            "config states one rope per layer)",
        },
        "read_from": {
            "type": "object",
            "required": ["keys", "tensors"],
            "additionalProperties": False,
            "properties": {
                "keys": {"type": "array", "items": {"type": "string"}},
                "tensors": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": [
        "architecture",
        "num_hidden_layers",
        "context_length",
        "n_ctx",
        "head_dim",
        "ropes",
        "nope_layers",
        "mrope",
        "mtp_layers",
        "unstated",
        "notes",
        "llama_cpp_version",
        "llama_cpp_rules",
    ],
    "additionalProperties": False,
    "properties": {
        "architecture": {"type": "string", "description": "general.architecture"},
        "num_hidden_layers": {
            "type": "integer",
            "description": "{arch}.block_count less the next-token-prediction layers",
        },
        "context_length": {
            "type": "integer",
            "description": "{arch}.context_length (0 for a vision projector: its positions are "
            "patches)",
        },
        "n_ctx": {
            "type": "integer",
            "description": "the context the answer is for (0 for a vision projector)",
        },
        "head_dim": {"type": "integer"},
        "ropes": {
            "type": "array",
            "items": _ROPE,
            "description": "every rope llama.cpp applies; every layer is in one rope's layers "
            "or in nope_layers",
        },
        "nope_layers": _INTEGERS,
        "mrope": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["section", "interleaved"],
                    "additionalProperties": False,
                    "properties": {"section": _INTEGERS, "interleaved": {"type": "boolean"}},
                },
            ],
            "description": "{arch}.rope.dimension_sections for M-RoPE files (interleaved: "
            "IMROPE); null otherwise",
        },
        "mtp_layers": {
            **_INTEGERS,
            "description": "layers the file holds past num_hidden_layers "
            "({arch}.nextn_predict_layers): multi-token-prediction blocks llama.cpp's decoder "
            "never runs (notes say whether a draft context runs them)",
        },
        "unstated": {
            "type": "array",
            "description": "ropes llama.cpp applies on these layers that no ggml_rope_ext call "
            "of a token's position states, with why (DeepSeek-V4's compressed blocks and its "
            "inverse rope); empty when every rope is in ropes",
            "items": {
                "type": "object",
                "required": ["layers", "applies_to", "reason"],
                "additionalProperties": False,
                "properties": {
                    "layers": _INTEGERS,
                    "applies_to": {"type": "array", "items": {"type": "string"}},
                    "reason": {"type": "string"},
                },
            },
        },
        "notes": {
            "type": "array",
            "items": {"type": "string"},
            "description": "what llama.cpp's source says beside the calls: a rope type given "
            "but no rope called (BERT, StarCoder), a draft model, multi-token-prediction "
            "layers, a rope that runs only with flash attention",
        },
        "llama_cpp_version": {
            "type": "object",
            "required": ["commit", "source"],
            "additionalProperties": False,
            "properties": {"commit": {"type": "string"}, "source": {"type": "string"}},
            "description": "the llama.cpp the per-architecture rules were read from",
        },
        "llama_cpp_rules": {
            "type": "string",
            "description": "the files of llama.cpp the architecture's row was read from: its "
            "hparams', then its graph's where that is another's",
        },
        "model": {
            "type": "object",
            **config_schemas.ANSWER_SCHEMA,
            "description": "with a config part: what POST /v1/rope/config answers for it",
        },
        "conforms": {
            "type": "boolean",
            "description": "with a config part: llama.cpp applies the model's rope at every "
            "layer for n_ctx (same frequencies, scaling, attention factor, layers and pairs)",
        },
        "findings": {
            "type": "array",
            "description": "with a config part: each way the file's rope differs from the "
            "model's, with its layers and both sides' values",
            "items": {
                "type": "object",
                "required": ["kind", "detail", "layers", "evidence"],
                "additionalProperties": False,
                "properties": {
                    "kind": {
                        "type": "string",
                        "enum": [
                            "nope_layers",
                            "rope_type",
                            "rotary_width",
                            "longrope_by_context",
                            "base",
                            "sliding_window_pattern",
                            "factor_tensor_missing",
                            "factor_tensor_wrong",
                            "scaling_dropped",
                            "scaling_changed",
                            "attention_factor",
                            "mrope_added",
                            "mrope_dropped",
                            "mrope_sections",
                            "mrope_fourth_id",
                        ],
                    },
                    "detail": {"type": "string"},
                    "layers": _INTEGERS,
                    "evidence": {"type": "object"},
                },
            },
        },
    },
}
