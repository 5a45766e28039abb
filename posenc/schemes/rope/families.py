"""What the config reader knows of model families, as data: a row per family, a row per key.

transformers computes every family's cos/sin the same way (``inv_freq`` from ``rope_theta``
and the rope type) but applies it differently: some families pair dimensions ``(2i, 2i+1)``,
some default to a partial rope, some give only some layers a rope, or ropes of their own.
:data:`FAMILIES` names what differs from Llama's rotate_half over the whole head, measured
against each family's own rotary module and apply call (``tests/reference/test_model_ropes.py``).
:data:`UNANSWERED_KEYS` are config keys that change the rope in a way one set of rope parameters
cannot say (per-layer ropes, multi-latent attention's rope width, multimodal sections): a config
that carries one is refused, naming the key, rather than answered with a rope the model does
not use.
"""

from __future__ import annotations

from dataclasses import dataclass

from posenc.schemes.rope.params import Layout


@dataclass(frozen=True)
class Family:
    """How one family's rope departs from Llama's: its pairing, its default rotated fraction,
    or why the service cannot answer it yet."""

    layout: Layout = "split"
    partial_rotary_factor: float | None = None  # the default when the config gives none
    # Without no_rope_layers, every nope_interval-th layer has no rope (no_rope_layer_interval).
    nope_interval: int | None = None
    unanswered: str | None = None


PER_LAYER = (
    "gives its layers different ropes (or none); answering one rope for every layer would be "
    "wrong, and per-layer answers are not served yet"
)
_INTERLEAVED_QK = (
    "applies its rope to q/k interleaved against a rotate_half cache (DeepSeek's "
    "rope_interleave); not answered yet"
)
_OWN_WIDTH = "takes its rope width from keys the service does not read yet"
_SEVERAL = "applies several ropes (or none) across its blocks; not answered yet"

FAMILIES: dict[str, Family] = {
    # Pairs (2i, 2i+1), as RoFormer: the cache is interleaved too.
    **dict.fromkeys(
        (
            "codegen",
            "cohere",
            "ernie4_5",
            "ernie4_5_moe",
            "glm",
            "glm4",
            "glm_ocr_text",
            "gptj",
            "helium",
            "openai_privacy_filter",
            "roformer",
        ),
        Family(layout="interleaved"),
    ),
    "gpt_neox": Family(partial_rotary_factor=0.25),
    # Some layers have no rope, by a rule of the family's own.
    **dict.fromkeys(
        (
            "afmoe",
            "cohere2",
            "cohere2_moe",
            "exaone4",
            "exaone_moe",
            "flint",
            "hrm_text",
            "kolibri1",
            "muse_glimmer_text",
            "muse_spark_text",
        ),
        Family(unanswered=PER_LAYER),
    ),
    # No rope in every fourth layer unless no_rope_layers says otherwise (SmolLM3's convention).
    **dict.fromkeys(("llama4_text", "mistral_large4_text", "smollm3"), Family(nope_interval=4)),
    **dict.fromkeys(
        (
            "axk1",
            "axk2",
            "bailing_hybrid",
            "deepseek_v2",
            "deepseek_v3",
            "deepseek_v32",
            "glm4_moe_lite",
            "glm_moe_dsa",
            "youtu",
        ),
        Family(unanswered=_INTERLEAVED_QK),
    ),
    **dict.fromkeys(
        ("jetmoe", "minimax_m3_vl_text", "musicflamingo", "zamba2"),
        Family(unanswered=_OWN_WIDTH),
    ),
    **dict.fromkeys(
        ("bamba", "granitemoehybrid", "kyutai_speech_to_text", "moshi", "recurrent_gemma"),
        Family(unanswered=_SEVERAL),
    ),
    "nanochat": Family(unanswered="rotates the other way (its sine negated); not answered yet"),
}

UNANSWERED_KEYS: dict[str, str] = {
    "text_config": "holds the rope of a multimodal model's text model; nested configs are not "
    "read yet",
    "qk_rope_head_dim": "multi-latent attention ropes only part of each head, possibly with "
    "interleaved q/k against a rotate_half cache; not answered yet",
    "rope_interleave": _INTERLEAVED_QK,
    "kv_channels": "the attention heads take their width from kv_channels, which the service "
    "does not read yet",
    "attention_head_dim": "the attention heads take their width from attention_head_dim, "
    "which the service does not read yet",
    "rope_local_base_freq": PER_LAYER,
    "sliding_window_pattern": PER_LAYER,
    "mrope_section": "multimodal rope (M-RoPE) is not answered yet",
}

# Where a multimodal config keeps its text model's, in the order transformers looks.
TEXT_CONFIGS = ("text_encoder", "decoder", "generator", "text_config", "vlm_config.text_config")

# Layer types without softmax attention: no rope is applied there.
ATTENTION_FREE = frozenset({"conv", "linear_attention", "mamba", "mamba2", "recurrent"})
