"""Model configs as the Hub publishes them, for families that keep their rope in keys of their
own: read by the API tests and compared with transformers by tests/reference."""

from __future__ import annotations

from typing import Any


# The llama3 ropes as their config.json files give them: Llama 3.1's (meta-llama/Llama-3.1-8B)
# and Llama 4's (no smooth band: its low and high frequency factors are equal). A fresh dict at
# each call: transformers' config classes write rope_theta into the one they are given.
def llama_31_rope_scaling() -> dict[str, Any]:
    return {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }


def llama_4_rope_scaling() -> dict[str, Any]:
    return {**llama_31_rope_scaling(), "factor": 16.0, "high_freq_factor": 1.0}


def llama_31_config() -> dict[str, Any]:
    """meta-llama/Llama-3.1-8B's config.json, its rope keys and sizes (the README's)."""
    return {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": llama_31_rope_scaling(),
    }


def qwen2_vl_config() -> dict[str, Any]:
    """Qwen/Qwen2-VL-7B-Instruct's config.json, its rope keys and sizes: M-RoPE."""
    return {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "num_hidden_layers": 28,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2},
        "image_token_id": 151655,
        "video_token_id": 151656,
        "vision_start_token_id": 151652,
    }


def tiny_qwen2_vl_config() -> dict[str, Any]:
    """Qwen2-VL's rope keys on a head of 16 (sections [2, 3, 3]): small enough for a kernel's
    dump in a test, a fresh dict at each call."""
    return {
        "model_type": "qwen2_vl",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    }


# Configs as the Hub publishes them, for families whose rope lives in keys of their own.
HUB_CONFIGS: dict[str, dict[str, Any]] = {
    "gemma3_text 1B": {
        "model_type": "gemma3_text",
        "hidden_size": 1152,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "num_hidden_layers": 26,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000,
        "rope_local_base_freq": 10000,
        "rope_scaling": None,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
    },
    "deepseek_v3": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "num_hidden_layers": 61,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "max_position_embeddings": 163840,
        "rope_theta": 10000,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
    },
    "cohere": {
        "model_type": "cohere",
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "num_hidden_layers": 40,
        "max_position_embeddings": 8192,
        "rope_theta": 8000000.0,
        "rope_scaling": None,
    },
    "jetmoe": {
        "model_type": "jetmoe",
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "kv_channels": 128,
        "num_hidden_layers": 24,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
    },
    "glm4": {
        "model_type": "glm4",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "num_hidden_layers": 40,
        "partial_rotary_factor": 0.5,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
    },
}

# Model types whose default config their own model cannot run (GLM-4V's sections over the
# whole head, Cohere-Compass's missing rope per layer type) or no rope can turn (GLM-4.5's odd
# rotary width): refused on their defaults, answered on the configs the Hub publishes, which
# are measured as every Hub-shaped config is (tests/reference/test_model_ropes.py) and make
# their text model types answered (tests/reference/class_defaults.py).
# Half of each 128-wide head turns (64 dimensions, 32 frequencies), in sections of 8, 12, 12.
_GLM_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]}
_GLM4V_TEXT = {
    "model_type": "glm4v_text",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "partial_rotary_factor": 0.5,
    "rope_parameters": _GLM_ROPE,
}
_COMPASS_TEXT = {
    "model_type": "cohere_compass_text",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "num_hidden_layers": 4,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    "rope_parameters": {
        "sliding_attention": {**_GLM_ROPE, "rope_theta": 50000.0, "mrope_section": [24, 20, 20]},
        "full_attention": None,
    },
}
_GLM4V_MOE_TEXT = {
    **_GLM4V_TEXT,
    "model_type": "glm4v_moe_text",
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "first_k_dense_replace": 1,
}
_GLM_IMAGE_TEXT = {**_GLM4V_TEXT, "model_type": "glm_image_text"}
# Qwen3-Omni's thinker: 128-wide heads, interleaved sections of 24, 20, 20 frequencies, in the
# older rope_scaling form its Hub file keeps.
_QWEN3_OMNI_TEXT = {
    "model_type": "qwen3_omni_moe_text",
    "hidden_size": 2048,
    "head_dim": 128,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "num_hidden_layers": 4,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 65536,
    "rope_theta": 1000000,
    "rope_scaling": {
        "interleaved": True,
        "mrope_interleaved": True,
        "mrope_section": [24, 20, 20],
        "type": "default",
    },
}
# HunYuan's checkpoints' rope: "dynamic" with an alpha, the base stretched once (ntk_alpha),
# whatever the sequence's length (HunyuanOCR's type says xdrope).
_HUNYUAN_ALPHA = {
    "alpha": 1000.0,
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "type": "dynamic",
}
_HUNYUAN_OCR_TEXT: dict[str, Any] = {
    "attention_head_dim": 128,
    "head_dim": 128,
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "num_hidden_layers": 24,
    "max_position_embeddings": 32768,
    "rope_scaling": {**_HUNYUAN_ALPHA, "type": "xdrope", "xdrope_section": [16, 16, 16, 16]},
    "rope_theta": 10000.0,
}
HUB_CONFIGS["Hunyuan-7B"] = {
    "model_type": "hunyuan_v1_dense",
    "hidden_size": 4096,
    "head_dim": 128,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "max_position_embeddings": 262144,
    "rope_theta": 10000.0,
    "rope_scaling": _HUNYUAN_ALPHA,
}
_DEFAULTS_BROKEN: dict[str, dict[str, Any]] = {
    "GLM-4.1V": {"model_type": "glm4v", "text_config": _GLM4V_TEXT},
    "GLM-4.1V text model": _GLM4V_TEXT,
    "GLM-4.6V": {"model_type": "glm46v", "text_config": _GLM4V_TEXT},
    "GLM-4.5V": {"model_type": "glm4v_moe", "text_config": _GLM4V_MOE_TEXT},
    "GLM-4.5V text model": _GLM4V_MOE_TEXT,
    "GLM-Image": {"model_type": "glm_image", "text_config": _GLM_IMAGE_TEXT},
    "GLM-Image text model": _GLM_IMAGE_TEXT,
    "Cohere-Compass": {"model_type": "cohere_compass", "text_config": _COMPASS_TEXT},
    "Cohere-Compass text model": _COMPASS_TEXT,
    "GLMGA": {"model_type": "glmga", "text_config": _GLM4V_TEXT},
    "Qwen3-Omni": {
        "model_type": "qwen3_omni_moe",
        "thinker_config": {"model_type": "qwen3_omni_moe_thinker", "text_config": _QWEN3_OMNI_TEXT},
    },
    "Qwen3-Omni thinker": {"model_type": "qwen3_omni_moe_thinker", "text_config": _QWEN3_OMNI_TEXT},
    "Qwen3-Omni text model": _QWEN3_OMNI_TEXT,
    # Its default head_dim is null, on which its attention fails: tencent/HunyuanOCR's
    # config.json, flat (its text keys at the top, folded into its text config), turning its
    # rope over four axes of 16 frequencies, its base stretched by alpha (ntk_alpha).
    "HunyuanOCR": {"model_type": "hunyuan_vl", **_HUNYUAN_OCR_TEXT},
    "HunyuanOCR text model": {**_HUNYUAN_OCR_TEXT, "model_type": "hunyuan_vl_text"},
    # Its default heads are 4096 / 96 = 42 wide, half of which (21) no rope can turn.
    "GLM-4.5": {
        "model_type": "glm4_moe",
        "hidden_size": 5120,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 4,
        "first_k_dense_replace": 1,
        "partial_rotary_factor": 0.5,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 131072,
    },
}

# Llama 4 Scout (meta-llama/Llama-4-Scout-17B-16E), its text model's keys as its config.json
# has them: "no_rope_layers": [], which Llama4TextConfig reads as none given (every fourth layer
# without a rope), beside its llama3 rope.
HUB_CONFIGS["Llama-4-Scout"] = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "attention_chunk_size": 8192,
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
        "head_dim": 128,
        "hidden_size": 5120,
        "interleave_moe_layer_step": 1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "max_position_embeddings": 10485760,
        "no_rope_layers": [],
        "num_attention_heads": 40,
        "num_experts_per_tok": 1,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "num_local_experts": 16,
        "rope_scaling": llama_4_rope_scaling(),
        "rope_theta": 500000.0,
        "use_qk_norm": True,
        "vocab_size": 202048,
    },
}

# Beam (reflection/Beam-1.0-501B-A23B) as its config class writes it: every sixth layer and the
# last full attention, whose rope is null (no rope), the others sliding, turned by the default
# rope.
HUB_CONFIGS["Beam"] = {
    "model_type": "beam",
    "hidden_size": 5120,
    "head_dim": 128,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "num_hidden_layers": 52,
    "max_position_embeddings": 8192,
    "sliding_window": 512,
    "layer_types": [
        *("sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(51)),
        "full_attention",
    ],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": None,
    },
}

# DeepSeek-V4-Flash (deepseek-ai), in the legacy keys its checkpoint ships: qk_rope_head_dim
# (the trailing 64 dimensions of each 512-wide head turn), compress_ratios (0: sliding
# attention, 4: compressed sparse, 128: heavily compressed; one more than the layers, for its
# next-token-prediction layer), the main rope at rope_theta and the compressed layers' at
# compress_rope_theta with rope_scaling's YaRN.
HUB_CONFIGS["DeepSeek-V4-Flash"] = {
    "model_type": "deepseek_v4",
    "hidden_size": 4096,
    "num_hidden_layers": 43,
    "num_attention_heads": 64,
    "num_key_value_heads": 1,
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "q_lora_rank": 1024,
    "o_groups": 8,
    "o_lora_rank": 1024,
    "index_n_heads": 64,
    "index_head_dim": 128,
    "index_topk": 512,
    "sliding_window": 128,
    "max_position_embeddings": 1048576,
    "rope_theta": 10000,
    "compress_rope_theta": 160000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 16,
        "original_max_position_embeddings": 65536,
        "type": "yarn",
    },
    "compress_ratios": [0, 0, *([4, 128] * 20), 4, 0],
}

# A dynamic (NTK-aware) rope, as community checkpoints of Llama 2 publish it (rope_scaling
# {"type": "dynamic", "factor": 2.0}): its frequencies grow once a sequence passes
# max_position_embeddings, where the harness measures them after a first forward there.
HUB_CONFIGS["Llama-2 dynamic NTK"] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "num_hidden_layers": 32,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "dynamic", "factor": 2.0},
}

# Hybrids whose default configs have no attention layer, so no rope to measure: their layers'
# kinds in keys of their own. Bamba-9B (ibm-ai-platform) names its attention layers by index;
# Granite-4.0-H-350M (ibm-granite) its layers in the older "mamba"/"attention" names, with no
# rope (position_embedding_type "nope"); RecurrentGemma-2B (google) repeats its block_types
# over 26 layers, half of each head turning.
_HYBRIDS: dict[str, dict[str, Any]] = {
    "Bamba-9B": {
        "model_type": "bamba",
        "attn_layer_indices": [9, 18, 27],
        "attn_rotary_emb": 64,
        "hidden_size": 4096,
        "mamba_d_head": 64,
        "mamba_d_state": 128,
        "mamba_n_heads": 128,
        "max_position_embeddings": 262144,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "rope_theta": 10000.0,
    },
    "Granite-4.0-H-350M": {
        "model_type": "granitemoehybrid",
        "hidden_size": 768,
        "layer_types": [
            *["mamba"] * 10,
            "attention",
            *["mamba"] * 2,
            "attention",
            *["mamba"] * 3,
            "attention",
            *["mamba"] * 9,
            "attention",
            *["mamba"] * 4,
        ],
        "mamba_d_head": 32,
        "mamba_d_state": 128,
        "mamba_n_heads": 48,
        "max_position_embeddings": 32768,
        "num_attention_heads": 12,
        "num_hidden_layers": 32,
        "num_key_value_heads": 4,
        "num_local_experts": 0,
        "position_embedding_type": "nope",
        "rope_theta": 10000,
    },
    "RecurrentGemma-2B": {
        "model_type": "recurrent_gemma",
        "attention_window_size": 2048,
        "block_types": ["recurrent", "recurrent", "attention"],
        "head_dim": 256,
        "hidden_size": 2560,
        "lru_width": 2560,
        "num_attention_heads": 10,
        "num_hidden_layers": 26,
        "num_key_value_heads": 1,
        "partial_rotary_factor": 0.5,
        "rope_theta": 10000.0,
    },
}

# Default configs whose models fail on a key their rope is read from (their config classes'
# default, null: Ministral's and HunYuan-MoE's attention computes head_dim ** -0.5, LFM2-MoE's
# model indexes layer_types), which the service refuses naming it: measured with the key
# given. Not as the Hub publishes them, which these do not claim to be; the class defaults
# otherwise.
_KEY_GIVEN: dict[str, dict[str, Any]] = {
    "Ministral, head_dim given": {
        "model_type": "ministral",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 100000000.0},
    },
    "HunYuan-MoE, head_dim given": {
        "model_type": "hunyuan_v1_moe",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 4,
        "head_dim": 128,
        "num_experts": 2,
        "moe_topk": 1,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "rope_scaling": _HUNYUAN_ALPHA,
    },
    "LFM2-MoE, layer_types given": {
        "model_type": "lfm2_moe",
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 6,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 128000,
        "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "full_attention"],
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    },
}

HUB_CONFIGS.update(_DEFAULTS_BROKEN)
HUB_CONFIGS.update(_KEY_GIVEN)
HUB_CONFIGS.update(_HYBRIDS)
