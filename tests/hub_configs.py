"""Model configs as the Hub publishes them, for families that keep their rope in keys of their
own: read by the API tests and compared with transformers by tests/reference."""

from __future__ import annotations

from typing import Any

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
