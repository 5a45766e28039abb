"""Tiny random transformers models of each family llama.cpp's converter writes, as data: the
model type and config keys each is built from (beside :data:`SMALL`'s widths), the architecture
llama.cpp names its file, and for those whose file llama.cpp turns otherwise than the model, the
finding that names it; for those the service's config reader cannot check, why.

Each is as small as it can be: two layers, or as many as one period of its sliding or recurrent
pattern needs to show its every kind of layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.hub_configs import llama_4_rope_scaling, llama_31_rope_scaling


@dataclass(frozen=True)
class Tiny:
    model_type: str
    keys: dict[str, Any]
    arch: str
    # causal: AutoModelForCausalLM; base: AutoModel (encoders); else a transformers class.
    build: str = "causal"
    # Written into config.json after saving: keys llama.cpp's converter reads under the names
    # the model's Hub checkpoints use.
    config: dict[str, Any] = field(default_factory=dict)
    # tokenizer.json's model type, for converters that read it (BERT's).
    tokenizer: str | None = None
    # Its vision projector converted too (converted["<name>.mmproj"]).
    mmproj: bool = False
    # Divergent models: the finding; answered ones: why the verdict is not checked.
    finding: str = ""
    why: str = ""


SMALL = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
SIGMOID = {"scoring_func": "sigmoid"}
# DeepSeek's multi-head latent attention at its smallest (V3.2 and GLM-5 add an indexer).
MLA: dict[str, Any] = {
    "num_hidden_layers": 2,
    "num_key_value_heads": 4,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 32,
    "v_head_dim": 32,
    "head_dim": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "index_n_heads": 4,
    "index_head_dim": 64,  # llama.cpp rotates indexer keys by a Hadamard matrix of 64 at least
    "index_topk": 4,
}
MODELS: dict[str, Tiny] = {
    "llama3.1": Tiny(
        "llama",
        {
            "num_hidden_layers": 2,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": llama_31_rope_scaling(),
        },
        "llama",
    ),
    "mistral": Tiny(
        "mistral",
        {"num_hidden_layers": 2, "max_position_embeddings": 32768, "rope_theta": 1e6},
        "llama",
    ),
    "qwen2.5-yarn": Tiny(
        "qwen2",
        {
            "num_hidden_layers": 2,
            "max_position_embeddings": 131072,
            "rope_theta": 1e6,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            },
        },
        "qwen2",
    ),
    "qwen3": Tiny(
        "qwen3",
        {
            "num_hidden_layers": 2,
            "max_position_embeddings": 40960,
            "rope_theta": 1e6,
            "head_dim": 32,
        },
        "qwen3",
    ),
    "phi3-longrope": Tiny(
        "phi3",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "longrope",
                "long_factor": np.linspace(1, 40, 8).tolist(),
                "short_factor": np.linspace(1, 1.5, 8).tolist(),
            },
        },
        "phi3",
    ),
    "gemma3": Tiny(
        "gemma3_text",
        {
            "num_hidden_layers": 8,
            "head_dim": 16,
            "max_position_embeddings": 131072,
            "rope_theta": 1e6,
            "rope_local_base_freq": 10000.0,
            "sliding_window": 512,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        },
        "gemma3",
    ),
    "gemma2": Tiny(
        "gemma2",
        {
            "num_hidden_layers": 4,
            "head_dim": 16,
            "sliding_window": 512,
            "max_position_embeddings": 8192,
        },
        "gemma2",
    ),
    "command-r": Tiny(
        "cohere", {"num_hidden_layers": 2, "max_position_embeddings": 8192}, "command-r"
    ),
    "cohere2": Tiny(
        "cohere2",
        {
            "rotary_pct": 1.0,
            "num_hidden_layers": 8,
            "sliding_window": 512,
            "max_position_embeddings": 8192,
            "rope_theta": 50000.0,
        },
        "cohere2",
    ),
    "olmo2": Tiny("olmo2", {"num_hidden_layers": 2}, "olmo2"),
    "olmo3": Tiny(
        "olmo3",
        {
            "num_hidden_layers": 8,
            "sliding_window": 512,
            "max_position_embeddings": 65536,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
            },
        },
        "olmo2",
    ),
    "smollm3": Tiny("smollm3", {"num_hidden_layers": 8}, "smollm3"),
    "granite": Tiny("granite", {"num_hidden_layers": 2}, "granite"),
    "starcoder2": Tiny("starcoder2", {"num_hidden_layers": 2}, "starcoder2"),
    "stablelm": Tiny(
        "stablelm", {"num_hidden_layers": 2, "partial_rotary_factor": 0.25}, "stablelm"
    ),
    # Phi-2 and OLMoE are multi-head (llama.cpp's graphs take no fewer key heads).
    "phi-2": Tiny(
        "phi",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "intermediate_size": 256,  # llama.cpp's n_ff for Phi-2: 4·n_embd
            "partial_rotary_factor": 0.5,
        },
        "phi2",
    ),
    "qwen2-moe": Tiny(
        "qwen2_moe",
        {
            "num_hidden_layers": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
        },
        "qwen2moe",
    ),
    "qwen3-moe": Tiny(
        "qwen3_moe",
        {
            "num_hidden_layers": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
        },
        "qwen3moe",
    ),
    "glm4": Tiny("glm4", {"num_hidden_layers": 2, "partial_rotary_factor": 0.5}, "glm4"),
    "deepseek-v2": Tiny(
        "deepseek_v2",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "kv_lora_rank": 16,
            "q_lora_rank": 16,  # llama.cpp reads it but for DeepSeek-V2-Lite's 26 or 27 layers
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 16,
            "v_head_dim": 16,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "max_position_embeddings": 163840,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 40.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 0.707,
                "mscale_all_dim": 0.707,
            },
        },
        "deepseek2",
    ),
    "qwen2-vl": Tiny(
        "qwen2_vl",
        {
            "num_hidden_layers": 2,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
            "vision_config": {"depth": 3, "embed_dim": 32, "hidden_size": 64, "num_heads": 2},
        },
        "qwen2vl",
        build="Qwen2VLForConditionalGeneration",
        mmproj=True,
    ),
    "ernie4.5": Tiny("ernie4_5", {"num_hidden_layers": 2}, "ernie4_5"),
    "ernie4.5-moe": Tiny(
        "ernie4_5_moe",
        {"num_hidden_layers": 2, "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32},
        "ernie4_5-moe",
    ),
    "gemma": Tiny("gemma", {"num_hidden_layers": 2, "head_dim": 16}, "gemma"),
    "olmoe": Tiny(
        "olmoe",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "num_experts": 4,
            "num_experts_per_tok": 2,
        },
        "olmoe",
    ),
    "nemotron": Tiny(
        "nemotron", {"num_hidden_layers": 2, "partial_rotary_factor": 0.5}, "nemotron"
    ),
    "mixtral": Tiny("mixtral", {"num_hidden_layers": 2, "num_local_experts": 4}, "llama"),
    "falcon": Tiny(
        "falcon",
        {
            "num_hidden_layers": 2,
            "new_decoder_architecture": True,
            "num_kv_heads": 2,
            "alibi": False,
        },
        "falcon",
    ),
    # Apertus: NEOX on unpermuted weights, with Llama 3's factor tensor.
    "apertus": Tiny("apertus", {"num_hidden_layers": 2}, "apertus"),
    "arcee": Tiny("arcee", {"num_hidden_layers": 2}, "arcee"),
    "llama4": Tiny(
        "llama4_text",
        {
            "num_hidden_layers": 8,
            "head_dim": 16,
            "num_local_experts": 2,
            "intermediate_size_mlp": 128,
            "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192,
            "max_position_embeddings": 262144,
            "rope_theta": 500000.0,
            "rope_scaling": llama_4_rope_scaling(),
        },
        "llama4",
    ),
    "seed-oss": Tiny("seed_oss", {"num_hidden_layers": 2}, "seed_oss"),
    # The architectures added with issue 41 (rows read from llama.cpp 0c1e57098).
    "afmoe": Tiny(
        "afmoe",
        {
            "num_hidden_layers": 4,
            "head_dim": 16,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "num_dense_layers": 1,
            "sliding_window": 128,
            "global_attn_every_n_layers": 4,
        },
        "afmoe",
    ),
    "cohere2-moe": Tiny(
        "cohere2_moe",
        {
            "num_hidden_layers": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "sliding_window": 128,
        },
        "cohere2moe",
    ),
    # The converter writes llama.cpp's expert_gating_func from the Hub configs' scoring_func.
    "deepseek-v3.2": Tiny(
        "deepseek_v32",
        {**MLA, "layer_types": ["indexed_attention"] * 2},
        "deepseek32",
        config=SIGMOID,
    ),
    "glm-5": Tiny(
        "glm_moe_dsa", {**MLA, "layer_types": ["indexed_attention"] * 2}, "glm-dsa", config=SIGMOID
    ),
    "eurobert": Tiny(
        "eurobert",
        {"num_hidden_layers": 2, "classifier_pooling": "mean"},
        "eurobert",
        build="base",
        tokenizer="WordPiece",
    ),
    "exaone-moe": Tiny(
        "exaone_moe",
        {
            "num_hidden_layers": 4,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "sliding_window": 128,
        },
        "exaone-moe",
        config=SIGMOID,
    ),
    "falcon-h1": Tiny(
        "falcon_h1",
        {
            "num_hidden_layers": 2,
            "head_dim": 16,
            "mamba_d_ssm": 32,
            "mamba_n_heads": 4,
            "mamba_d_head": 8,
            "mamba_d_state": 8,
            "mamba_n_groups": 1,
        },
        "falcon-h1",
    ),
    # Gemma 3n: one period of its five-layer pattern (four sliding, one full).
    "gemma3n": Tiny(
        "gemma3n_text",
        {
            "num_hidden_layers": 5,
            "head_dim": 16,
            "intermediate_size": [128] * 5,
            "activation_sparsity_pattern": [0.0] * 5,
            "num_kv_shared_layers": 0,
            "laurel_rank": 64,  # llama.cpp's: n_embd
            "hidden_size_per_layer_input": 256,  # llama.cpp's n_embd_altup
            "vocab_size_per_layer_input": 128,
            "altup_num_inputs": 4,
            "layer_types": None,
        },
        "gemma3n",
    ),
    # Gemma 4: a sliding layer at its local base and a full one with its own head width and
    # proportional rope (rope_freqs: 1 for the rotated pairs, 1e30 for the frozen ones).
    "gemma4": Tiny(
        "gemma4_text",
        {
            "num_hidden_layers": 2,
            "head_dim": 16,
            "global_head_dim": 32,
            "sliding_window": 128,
            "vocab_size_per_layer_input": 128,
        },
        "gemma4",
    ),
    "embeddinggemma": Tiny(
        "gemma3_text",
        {
            "num_hidden_layers": 6,
            "head_dim": 16,
            "sliding_window": 128,
            "use_bidirectional_attention": True,
        },
        "gemma-embedding",
        build="base",
    ),
    # GLM-4.5: partial rotary, and a multi-token-prediction layer past the trunk.
    "glm-4.5": Tiny(
        "glm4_moe",
        {
            "num_hidden_layers": 2,
            "head_dim": 16,
            "partial_rotary_factor": 0.5,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "num_nextn_predict_layers": 1,
        },
        "glm4moe",
    ),
    "granite-swa": Tiny(
        "granite_swa", {"num_hidden_layers": 2, "sliding_window": 128}, "granite_swa"
    ),
    "granite-moe": Tiny(
        "granitemoe",
        {"num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2},
        "granitemoe",
    ),
    "hunyuan-dense": Tiny(
        "hunyuan_v1_dense", {"num_hidden_layers": 2, "head_dim": 16}, "hunyuan-dense"
    ),
    "hy-v3": Tiny("hy_v3", {"num_hidden_layers": 2, "head_dim": 16}, "hy_v3"),
    # Laguna: a full layer (YaRN-ready, partial rotary) and a sliding one (plain, full width).
    "laguna": Tiny(
        "laguna",
        {
            "num_hidden_layers": 2,
            "head_dim": 16,
            "layer_types": ["full_attention", "sliding_attention"],
        },
        "laguna",
    ),
    # LFM2: a convolution layer (head_count_kv 0, no rope) and an attention layer.
    "lfm2": Tiny(
        "lfm2",
        {"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"], "block_ff_dim": 128},
        "lfm2",
    ),
    "lfm2-moe": Tiny(
        "lfm2_moe",
        {
            "num_hidden_layers": 2,
            "layer_types": ["conv", "full_attention"],
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "num_dense_layers": 1,
        },
        "lfm2moe",
    ),
    # Rows read before issue 41, converted since.
    "jais2": Tiny("jais2", {"num_hidden_layers": 2}, "jais2"),
    "olmo": Tiny("olmo", {"num_hidden_layers": 2}, "olmo"),
    "minimax-m2": Tiny(
        "minimax_m2",
        {"num_hidden_layers": 2, "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2},
        "minimax-m2",
        config={"rotary_dim": 16, **SIGMOID},  # the Hub's keys the converter reads
    ),
    "modernbert": Tiny(
        "modernbert",
        {"num_hidden_layers": 3, "global_attn_every_n_layers": 3, "local_attention": 64},
        "modern-bert",
        build="base",
        config={"layer_norm_eps": 1e-5},
    ),
}


# Models llama.cpp applies another rope to, as its own source says (the finding that names it).
DIVERGENT: dict[str, Tiny] = {
    "exaone4": Tiny(
        "exaone4",
        {"num_hidden_layers": 4, "sliding_window": 512},
        "exaone4",
        finding="nope_layers",
        why="EXAONE 4.0's sliding layers (and the NoPE full ones) exist in llama.cpp only at 64 "
        "layers",
    ),
    "gpt-oss": Tiny(
        "gpt_oss",
        {
            "num_hidden_layers": 2,
            "num_local_experts": 4,
            "head_dim": 16,
            "sliding_window": 128,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            },
        },
        "gpt-oss",
        finding="scaling_changed",
        why="gpt-oss's YaRN has truncate false; ggml always rounds the ramp's ends",
    ),
    "qwen3-vl": Tiny(
        "qwen3_vl",
        {
            "text_config": {
                **SMALL,
                "num_hidden_layers": 2,
                "head_dim": 16,
                "rope_scaling": {
                    "rope_type": "default",
                    "mrope_section": [2, 3, 3],
                    "mrope_interleaved": True,
                },
            },
            "vision_config": {
                "depth": 3,  # the converter maps merger.mlp.2 by a block index
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 2,
                "out_hidden_size": 64,
                "deepstack_visual_indexes": [0],
            },
        },
        "qwen3vl",
        build="Qwen3VLForConditionalGeneration",
        mmproj=True,
        finding="mrope_fourth_id",
        why="Qwen3-VL's IMROPE turns the pairs its sections leave (pair 6 of these 8) by a fourth "
        "id, which llama.cpp sets to 0 for a text prompt's tokens; transformers turns them by the "
        "temporal id",
    ),
    "afmoe-every-2": Tiny(
        "afmoe",
        {
            "num_hidden_layers": 2,
            "head_dim": 16,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "num_dense_layers": 1,
            "sliding_window": 128,
            "global_attn_every_n_layers": 2,
        },
        "afmoe",
        finding="nope_layers",
        why="llama.cpp's AFMoE takes every fourth layer as the full, NoPE one "
        "(load_swa_pattern(ml, 4), n_no_rope_layer_step 4) and the converter writes neither: a "
        "model whose full layers come every second has its layer 1 rotated",
    ),
    # Mellum: one period of its pattern (llama.cpp builds sliding caches for it and asserts some
    # layer slides).
    "mellum": Tiny(
        "mellum",
        {
            "num_hidden_layers": 4,
            "sliding_window": 128,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
        },
        "mellum",
        finding="base",
        why="llama.cpp's Mellum graph turns its sliding layers at the context's base (freq_base: "
        "the full layers' 500000) though its loader reads rope.freq_base_swa; transformers' "
        "Mellum turns them at their own rope_theta, 10000",
    ),
    "bamba": Tiny(
        "bamba",
        {
            "num_hidden_layers": 2,
            "attn_layer_indices": [1],
            "mamba_n_heads": 4,
            "mamba_d_head": 32,
            "mamba_d_state": 8,
            "mamba_n_groups": 1,
        },
        "granitehybrid",
        finding="rotary_width",
        why="transformers' Bamba rotates half of each head (partial_rotary_factor 0.5); "
        "llama.cpp's converter writes rope.dimension_count only from attn_rotary_emb, which "
        "transformers' BambaConfig does not have, so llama.cpp rotates the whole head",
    ),
}


# Models whose files are answered and held to llama.cpp's source, but whose verdict against
# the model's config cannot be checked: why.
ANSWERED: dict[str, Tiny] = {
    "bert": Tiny(
        "bert",
        {"num_hidden_layers": 2},
        "bert",
        build="base",
        tokenizer="WordPiece",
        why="BERT has learned absolute positions: llama.cpp calls no rope (every layer NoPE), and "
        "the service's config reader measures no rope for bert",
    ),
    "starcoder": Tiny(
        "gpt_bigcode",
        {"n_embd": 64, "n_head": 4, "n_layer": 2},
        "starcoder",
        why="GPT BigCode has learned absolute positions: llama.cpp calls no rope though its "
        "rope type is NORM, and the service's config reader measures no rope for gpt_bigcode",
    ),
    "hrm-text": Tiny(
        "hrm_text",
        {"num_hidden_layers": 2, "num_key_value_heads": 4},  # HRM's attention is multi-head
        "hrm_text",
        why="llama.cpp's block_count is HRM's cache slots (layers per stack × H cycles × (L "
        "cycles + 1) = 16), the config reader's layers are the stack's: the one rope every slot "
        "turns is held to the model's",
    ),
    "qwen4-exp": Tiny(
        "qwen4_exp_text",
        {
            "num_hidden_layers": 4,
            "layer_types": None,
            "head_dim": 16,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
            "hc_count": 2,
            "hc_lowrank": 8,
            "ple_embed_dim": 8,
            "ngram_vocab_size_base": 256,
            "split_ngram_parts": 2,
            "indexer_n_heads": 2,
            "indexer_kv_heads": 1,
            "indexer_head_dim": 16,
            "indexer_budget": 4,
            "indexer_compress_ratio": 4,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e7,
                "partial_rotary_factor": 0.25,
                "mrope_section": [1, 1, 0],
                "mrope_interleaved": True,
            },
        },
        "qwen4exp",
        why="the service's config reader refuses qwen4_exp_text's mrope_section (it is not among "
        "the multimodal model types it reads)",
    ),
    "phimoe": Tiny(
        "phimoe",
        {
            "num_hidden_layers": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "max_position_embeddings": 131072,
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": np.linspace(1, 1.5, 8).tolist(),
                "long_factor": np.linspace(1, 40, 8).tolist(),
                "original_max_position_embeddings": 4096,
                "short_mscale": 1.2,
                "long_mscale": 1.2,
            },
            "original_max_position_embeddings": 4096,
            "lm_head_bias": True,
            "attention_bias": True,
        },
        "phimoe",
        config={"architectures": ["PhiMoEForCausalLM"]},
        why="the service's config reader refuses PhiMoE's short_mscale and long_mscale; the "
        "converter registers PhiMoEForCausalLM, transformers names the class PhimoeForCausalLM",
    ),
}
