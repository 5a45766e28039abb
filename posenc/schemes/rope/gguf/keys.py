"""Which of a GGUF file's keys can say something of a rope: the reader builds their values and
steps over every other one (a vocabulary, a chat template, a license)."""

from __future__ import annotations

# The keys a rope is read from: general.architecture and general.alignment, and of
# "{arch}.<suffix>" only these suffixes (any architecture's: the architecture may come later).
_SUFFIXES = (
    "context_length",
    "block_count",
    "embedding_length",
    "leading_dense_block_count",
    "nextn_predict_layers",
    "expert_count",
    "interleave_moe_layer_step",
    "no_rope_layer_step",
    "n_deepstack_layers",
    "full_attention_interval",
    "num_loops",
    "hyper_connection.count",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.key_length_swa",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "attention.kv_lora_rank",
    "attention.recurrent_layers",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attention.temperature_length",
    "attention.temperature_scale",
    "attention.rope_pattern",
    "attention.shared_kv_layers",
    "attention.indexer.types",
    "attention.indexer.top_k",
    "attention.compress_ratios",
    "attention.compress_rope_freq_base",
    # a vision projector's (an mmproj file: general.architecture clip)
    "projector_type",
    "vision.projector_type",
    "vision.block_count",
    "vision.embedding_length",
    "vision.attention.head_count",
    "vision.attention.head_dim",
    "audio.block_count",
    "audio.embedding_length",
    "audio.attention.head_count",
    "audio.attention.head_dim",
)
_PREFIXES = ("rope.",)


def wanted(key: str) -> bool:
    """Whether ``key`` can say something of a rope (so its value is built, not stepped over)."""
    if key in ("general.architecture", "general.alignment"):
        return True
    arch, dot, suffix = key.partition(".")
    if not dot or arch in ("general", "tokenizer", "split", "adapter", "quantize"):
        return False
    return suffix in _SUFFIXES or suffix.startswith(_PREFIXES)
