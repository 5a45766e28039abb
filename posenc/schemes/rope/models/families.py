"""What the config reader knows of model families, as data: a row per family, a row per key.

transformers computes every family's cos/sin the same way (``inv_freq`` from ``rope_theta``
and the rope type) but applies it differently: some families lay their cache out in pairs
``(2i, 2i+1)`` or re-lay it as they apply it, some default to a partial rope, some give some
layers no rope or a rope of their own, some keep the head's width in a key of their own.
:data:`FAMILIES` names what differs from Llama's rotate_half over the whole head, each row
measured against the family's own rotary module and apply call
(``tests/reference/test_model_ropes.py``); a family the service cannot answer yet says why.
:data:`UNANSWERED_KEYS` are config keys whose meaning the reader does not model: a config that
carries one is refused, naming the key, rather than answered with a rope the model does not use.

Why one module: it is data, one row per family and the keys every row is read with; split by
kind of family, a reader looking up one model type would have to know which file it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass

from posenc.schemes.rope.models.layer_rules import CycledLayers, IndexedLayers, LetteredLayers
from posenc.schemes.rope.params import Layout, Precision


@dataclass(frozen=True)
class LegacyLayers:
    """A family's older per-layer form (Gemma 3's): the ``full`` layers' rope is the top-level
    ``rope_theta`` with ``rope_scaling``, the ``local`` ones' the default rope of another base
    (``local_base_key``)."""

    local: str
    full: str
    local_base_key: str
    default_local_base: float


@dataclass(frozen=True)
class WideLayers:
    """Heads of another width in one layer type, as a family's config class writes them into
    ``per_layer_config`` when the config gives none (Gemma 4's full-attention layers:
    ``global_head_dim``, default 512)."""

    layer_type: str
    head_key: str
    default_head: int


@dataclass(frozen=True)
class RopeSwitch:
    """A config key that turns a family's rope on: where it does not hold ``value`` (any true
    value when None, off when absent, as the config classes default), no layer has a rope.
    Switched on, the rope is read as any other where ``read``, else refused (not read yet)."""

    key: str
    value: str | None = None
    read: bool = False


@dataclass(frozen=True)
class Family:
    """How one family's rope departs from Llama's: its pairing, its default rotated fraction,
    or why the service cannot answer it yet."""

    layout: Layout = "split"  # how the rotary module lays out its cos/sin
    # The pairs q/k turn in, where the apply call re-lays the cache: "interleaved", or DeepSeek's
    # "interleaved_to_rotate_half" (pairs (2i, 2i+1) of q/k written to (i, i + d/2)), or
    # "reversed" (the cache's own pairs, turned by −θ).
    apply: str | None = None
    apply_key: str | None = None  # the config flag that turns ``apply`` on or off (APPLY_KEYS)
    partial_rotary_factor: float | None = None  # the default when the config gives none
    # Without no_rope_layers, every nope_interval-th layer has no rope (no_rope_layer_interval).
    nope_interval: int | None = None
    # Its config class reads an empty no_rope_layers as none given (Llama 4's: ``if
    # self.no_rope_layers``); the others keep it, and their models then fail on it.
    empty_nope_flags_unset: bool = False
    # Its config class's NOPE_LAYER_LISTS list where the config gives none or null (Mllama's
    # cross_attention_layers), those below num_hidden_layers being layers.
    default_nope_list: tuple[int, ...] = ()
    unanswered: str | None = None
    attention_free: frozenset[str] | None = None  # layer types without a rope (else the default)
    nope_types: frozenset[str] = frozenset()  # attention layer types the family gives no rope
    default_base: float = 10000.0  # rope_theta when the config gives none
    legacy_layers: LegacyLayers | None = None  # how its pre-v5 configs name per-layer ropes
    # Without layer_types: every sliding_window_pattern-th layer (default this) is full
    # attention, the others sliding, as the family's config class derives them.
    layer_pattern: int | None = None
    head_key: str = "head_dim"  # the key holding the attention head's width
    rope_switch: RopeSwitch | None = None  # the key that turns its rope on, where one does
    wide_layers: WideLayers | None = None  # without per_layer_config: one type's own heads
    # Its rotary module's own default rope turns the whole head, whatever
    # partial_rotary_factor says (the other rope types read it).
    default_whole_head: bool = False
    # Keys its config class reads under names of its own (transformers' attribute_map):
    # (the reader's name, the config's), read where the config lacks the reader's.
    aliases: tuple[tuple[str, str], ...] = ()
    # Keys the reader would take for the rope's width that this family's rope does not read.
    ignored: tuple[str, ...] = ()
    # The M-RoPE family (.mrope.families) whose mrope_section its rotary module splits the
    # frequencies by: read and checked, then set aside (a text token's three ids are equal).
    mrope: str | None = None
    # It reads rope_parameters per layer type (the flat form is refused), a type's null giving
    # its layers no rope.
    null_ropes: bool = False
    # (key, n): without num_hidden_layers, the layers are the key's blocks × their n attention
    # sublayers, each its own layer index (LongCat-Flash's two per num_layers).
    blocks: tuple[str, int] | None = None
    # Layer types its config class derives from keys of its own: it has no layer_types to set
    # (a config.json giving one does not load).
    derived_layers: IndexedLayers | CycledLayers | None = None
    rope_types: frozenset[str] | None = None  # the rope types its rotary module accepts
    # Its attention turns the whole head by the cache it is given: a rope type that turns part
    # of the head gives a cache the model cannot apply.
    whole_head_apply: bool = False
    # Its text model turns no q/k by a rope (its rotary module, where it has one, serves
    # another sub-model): every layer is a NoPE layer.
    applies_no_rope: bool = False
    # Without layer_types, the layer types its config class spells in letters.
    lettered_layers: LetteredLayers | None = None
    # The layer types its model runs (its masks are keyed by them): any other fails.
    layer_names: frozenset[str] | None = None
    # Keys its config class reads under names of its own that win over the reader's where both
    # are given (transformers' attribute_map, set after the field): (the reader's, the config's).
    overrides: tuple[tuple[str, str], ...] = ()
    # The key that counts its layers in place of num_hidden_layers, where the config gives it
    # (null: its config class derives it from num_hidden_layers, read then).
    layer_count_key: str | None = None
    # HunYuan's rotary module: rope_type "dynamic" with a nonzero alpha is no dynamic scaling
    # but a fixed stretch of the base, rope_theta · alpha^(head_dim/(head_dim − 2)), its other
    # scaling keys unread (transformers' ntk_alpha).
    ntk_alpha: bool = False
    # HunYuan-VL's rotary module turns its frequencies over len(mrope_section) axes (3 or 4;
    # xdrope_section, rope_type "xdrope" in its checkpoints): required, and read and checked
    # against the head (.xdrope), then set aside, a text token's ids being equal on every axis.
    xdrope: bool = False
    # The only keys its rope depends on (RoFormer's table: the head is hidden_size /
    # num_attention_heads, the base 10000, whatever else the config says): the reader sees
    # no others.
    reads: frozenset[str] | None = None
    # Its ropes keyed by label, not by layer type (DeepSeek-V4's main and compress): (layer
    # type, the label of its rope), read by .labelled.
    rope_labels: tuple[tuple[str, str], ...] = ()
    # Its rope turns the head's trailing dimensions, not its leading ones (the answer's
    # rotary_offset: the first dimension that turns).
    rope_at_end: bool = False
    # (key, why): a config that sets the key true is refused, naming it (RoFormer's
    # rotary_value turns the values too).
    refused_flags: tuple[tuple[str, str], ...] = ()
    # The precision its framework computes the table in, where it is not float32
    # (RopeParams.framework_precision).
    framework_precision: Precision | None = None
    # Keys its model reads as the config gives them, where its config class's default (null)
    # leaves the model unable to run (Ministral's attention computes head_dim ** -0.5): a
    # config without them is refused, naming the key, rather than answered by a fallback
    # the model does not take.
    required: tuple[str, ...] = ()


# Keys that give the number of layers, in the order read.
LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers")

PER_LAYER = (
    "gives its layers ropes (or none) by a rule of its own that the reader does not model yet"
)
_FULL = frozenset({"full_attention"})
_DEEPSEEK_QK = "interleaved_to_rotate_half"
_OWN_WIDTH = "takes its rope width from keys the service does not read yet"
# Keys the reader would take for the rope's width that these families' code never reads.
_WIDTH_KEYS = ("rotary_pct", "rotary_dim", "qk_rope_head_dim")

FAMILIES: dict[str, Family] = {
    # Pairs (2i, 2i+1), as RoFormer: the cache is interleaved too (or one value per pair).
    **dict.fromkeys(
        (
            "blt_global_transformer",
            "blt_local_decoder",
            "blt_local_encoder",
            "blt_patcher",
            "codegen",
            "cohere",
            "glm_ocr_text",
            "gptj",
            "openai_privacy_filter",
        ),
        Family(layout="interleaved"),
    ),
    # A rotate_half cache whose first half the apply call repeats pairwise: q/k turn in
    # pairs (2i, 2i+1).
    **dict.fromkeys(
        (
            "ernie4_5",
            "ernie4_5_moe",
            "glm",
            "glm4",
            "helium",
            "moonshine_streaming",
        ),
        Family(apply="interleaved"),
    ),
    # No rope in the full-attention layers: only the sliding-window ones turn q/k.
    **dict.fromkeys(
        (
            "afmoe",
            "exaone4",
            "exaone_moe",
            "flint",
            "kolibri1",
            "muse_glimmer_text",
            "muse_spark_text",
        ),
        Family(nope_types=_FULL),
    ),
    **dict.fromkeys(
        ("cohere2", "cohere2_moe"),
        Family(layout="interleaved", nope_types=_FULL, layer_pattern=4),
    ),
    "gemma3_text": Family(
        default_base=1_000_000.0,
        legacy_layers=LegacyLayers(
            "sliding_attention", "full_attention", "rope_local_base_freq", 10_000.0
        ),
        layer_pattern=6,
    ),
    # DeepSeek V2's complex freqs_cis turns pairs (2i, 2i+1); V3's interleaved q/k against a
    # rotate_half cache is the config's rope_interleave (APPLY_KEYS).
    "deepseek_v2": Family(layout="interleaved"),
    # Multi-latent attention turning q/k pairs (2i, 2i+1) into a rotate_half cache unless the
    # config says rope_interleave: false (their config classes default it to true).
    **dict.fromkeys(
        ("axk1", "deepseek_v3", "glm4_moe_lite", "mistral4", "youtu"),
        Family(apply=_DEEPSEEK_QK, apply_key="rope_interleave"),
    ),
    # The same, whatever the config says (their modeling code reads no flag).
    **dict.fromkeys(
        ("axk2", "bailing_hybrid", "deepseek_v32", "dots3_note_text", "glm_moe_dsa", "kimi_k25"),
        Family(apply=_DEEPSEEK_QK),
    ),
    # Its linear-attention layers turn q/k too.
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), Family(attention_free=frozenset())),
    "gpt_neox": Family(partial_rotary_factor=0.25),
    # One rope, turned by every attention of its two stacks (the same layer_idx in each, for
    # every cycle): its layers are those of a stack. transformers rewrites num_hidden_layers as
    # the cache slots of its cycles (num_layers_per_stack · H_cycles · (L_cycles + 1)) and keeps
    # the count of a stack's layers in num_layers_per_stack, which it saves.
    "hrm_text": Family(layer_count_key="num_layers_per_stack"),
    # No rope in every fourth layer unless no_rope_layers says otherwise (SmolLM3's convention).
    "smollm3": Family(nope_interval=4),
    # Its Hub configs (Scout, Maverick) say "no_rope_layers": [], read as the interval's.
    "llama4_text": Family(  # complex freqs_cis
        layout="interleaved", nope_interval=4, empty_nope_flags_unset=True
    ),
    "mistral_large4_text": Family(apply=_DEEPSEEK_QK, nope_interval=4),
    "musicflamingo": Family(unanswered=_OWN_WIDTH),
    # Its cross-attention layers attend to the image, by no rope.
    "mllama_text_model": Family(default_nope_list=(3, 8, 13, 18, 23, 28, 33, 38)),
    # CLVP's text model is its text encoder, whose attention turns the first
    # max(projection_dim // (2 · heads), 32) dimensions of q, k and v (the values too) by
    # positions of its own (arange of the sequence); its decoder applies no rope at all
    # (learned absolute positions).
    **dict.fromkeys(
        ("clvp", "clvp_encoder"),
        Family(
            unanswered="its text encoder turns q, k and v (the values too) over "
            "max(projection_dim // (2 · num_attention_heads), 32) dimensions where "
            "use_rotary_embedding is true: not answered yet"
        ),
    ),
    "clvp_decoder": Family(applies_no_rope=True),
    # The temporal transformer (the text model) turns q/k in every layer as Llama's does, its
    # default rope over the whole head; its depth decoder has no rope, its audio codec (Mimi)
    # one of its own. Its other rope types read partial_rotary_factor, which its attention
    # cannot apply.
    **dict.fromkeys(
        ("kyutai_speech_to_text", "moshi"),
        Family(default_whole_head=True, whole_head_apply=True, ignored=_WIDTH_KEYS),
    ),
    # Mamba layers, and attention layers where attn_layer_indices lists them, turning half of
    # each head (its config class sets partial_rotary_factor to 0.5, whatever the config says
    # beside rope_parameters).
    "bamba": Family(
        partial_rotary_factor=0.5,
        derived_layers=IndexedLayers("attn_layer_indices", "full_attention", "linear_attention"),
        ignored=("partial_rotary_factor", *_WIDTH_KEYS),
    ),
    # Recurrent blocks and local attention, block_types repeated over the layers; its rotary
    # module turns half of each head by default and accepts no rope type but the default.
    "recurrent_gemma": Family(
        partial_rotary_factor=0.5,
        derived_layers=CycledLayers(
            "block_types",
            ("recurrent", "recurrent", "attention"),
            "recurrent",
            "linear_attention",
            "sliding_attention",
            100,
        ),
        rope_types=frozenset({"default"}),
        ignored=_WIDTH_KEYS,
    ),
    # Mamba layers ("linear_attention", or "mamba" as older configs say) and attention layers
    # ("full_attention", or "attention"), the latter with a rope only where
    # position_embedding_type is "rope": its default rope turns the whole head; the others
    # read partial_rotary_factor, which its attention cannot apply.
    "granitemoehybrid": Family(
        attention_free=frozenset({"linear_attention", "mamba"}),
        # transformers renames the older "attention" and "mamba" as it loads the config.
        layer_names=frozenset({"full_attention", "linear_attention", "attention", "mamba"}),
        rope_switch=RopeSwitch("position_embedding_type", "rope", read=True),
        default_whole_head=True,
        whole_head_apply=True,
        overrides=(("layer_types", "layers_block_type"),),
        ignored=_WIDTH_KEYS,
    ),
    # ERNIE-4.5-VL keeps its frequencies permuted (each height/width pair's evens, then odds:
    # pre-rotated for its sections) and interleaves the chunks back: a text token's pairs
    # (2i, 2i+1), repeated pairwise, turn by ω_i in ascending order.
    "ernie4_5_vl_moe_text": Family(layout="interleaved", mrope="ernie4_5_vl_moe"),
    # Full-attention layers of heads global_head_dim wide (in per_layer_config once loaded),
    # turned by a proportional rope over part of them.
    **dict.fromkeys(
        ("gemma4_text", "gemma4_unified_text"),
        Family(
            wide_layers=WideLayers("full_attention", "global_head_dim", 512),
            default_whole_head=True,
        ),
    ),
    "diffusion_gemma_text": Family(
        wide_layers=WideLayers("full_attention", "global_head_dim", 512)
    ),
    "lfm3": Family(default_whole_head=True),
    "jetmoe": Family(head_key="kv_channels"),
    # Gemma 4's wider full-attention heads (global_head_dim, default 512), under default ropes.
    "embedding_gemma2_text": Family(
        wide_layers=WideLayers("full_attention", "global_head_dim", 512)
    ),
    # The text models of M-RoPE families, read alone: GLM-4V repeats its cache pairwise.
    "glm4v_text": Family(layout="interleaved", mrope="glm4v"),
    "glm4v_moe_text": Family(mrope="glm4v_moe"),
    "glm_image_text": Family(mrope="glm_image"),
    "cosmos3_edge_text": Family(mrope="cosmos3_edge"),
    "qwen3_omni_moe_text": Family(mrope="qwen3_omni_moe"),
    # Its default rope and its ntk_alpha turn the whole head (head_dim, which it requires),
    # whatever partial_rotary_factor says; checkpoints name head_dim attention_head_dim.
    # rope_type dynamic with an alpha: HunYuan's fixed stretch of the base (ntk_alpha), over
    # the head_dim its module requires.
    **dict.fromkeys(
        ("hunyuan_v1_dense", "hunyuan_v1_moe"), Family(ntk_alpha=True, required=("head_dim",))
    ),
    # Its attention reads head_dim as given (its config class's default is null).
    "ministral": Family(required=("head_dim",)),
    # Its model tells attention layers from convolutions by layer_types alone (no default).
    "lfm2_moe": Family(required=("layer_types",)),
    "hunyuan_vl_text": Family(
        ntk_alpha=True,
        xdrope=True,
        default_whole_head=True,
        aliases=(("head_dim", "attention_head_dim"),),
        required=("head_dim",),
    ),
    # Its default config, with no rope per layer type, is one its model cannot run (refused).
    "cohere_compass_text": Family(mrope="cohere_compass", null_ropes=True),
    "beam": Family(null_ropes=True),
    # Its default config lacks attn_config.rope_theta, so its own model cannot be built from it.
    "dbrx": Family(
        unanswered="its attention cannot be built without attn_config.rope_theta (its default "
        "config lacks it), which transformers 5 then ignores, turning by rope_parameters "
        "(default 10000): the checkpoint's base and transformers' differ"
    ),
    # One rotary module, sized by the decoder's heads, for the encoder's layers and the
    # decoder's; the apply call repeats the cache's first half pairwise.
    "moonshine": Family(
        apply="interleaved",
        aliases=(
            ("num_attention_heads", "decoder_num_attention_heads"),
            ("num_hidden_layers", "decoder_num_hidden_layers"),
        ),
    ),
    # Its rope turns the whole head; rotary_dim is a config key its modeling code never reads.
    "minimax_m3_vl_text": Family(ignored=("rotary_dim",)),
    # Relative position embeddings unless position_embeddings_type="rotary" (a rope computed
    # from the sequence length, not read yet).
    **dict.fromkeys(
        ("wav2vec2-bert", "wav2vec2-conformer"),
        Family(rope_switch=RopeSwitch("position_embeddings_type", "rotary")),
    ),
    # Its text model has no rope (sinusoidal positions); its speech encoder turns one only where
    # position_embeddings_type="rotary" (relative by default), over the speech encoder's heads,
    # not the text model's: refused then. Its layers are its decoder's (num_hidden_layers).
    "seamless_m4t": Family(
        rope_switch=RopeSwitch("position_embeddings_type", "rotary"),
        aliases=(
            ("num_hidden_layers", "decoder_layers"),
            ("num_attention_heads", "decoder_attention_heads"),
        ),
    ),
    # Its shared attention blocks turn q/k only with use_mem_rope, over a width of their own.
    "zamba2": Family(rope_switch=RopeSwitch("use_mem_rope")),
    # Multi-latent attention, its q/k pairs (2i, 2i+1) turned into a rotate_half cache.
    "longcat_flash": Family(apply=_DEEPSEEK_QK, blocks=("num_layers", 2)),
    # Mamba, MoE, MLP and attention layers, its attention turning no q/k (its modeling file's
    # apply function is called nowhere): its layers are layer_types (or layers_block_type, or
    # hybrid_override_pattern's letters), whatever num_hidden_layers says.
    "nemotron_h": Family(
        applies_no_rope=True,
        aliases=(("layer_types", "layers_block_type"),),
        ignored=LAYER_COUNTS,
        lettered_layers=LetteredLayers(
            "hybrid_override_pattern",
            (("M", "linear_attention"), ("E", "moe"), ("*", "full_attention"), ("-", "mlp")),
            ("linear_attention", "moe", "full_attention", "mlp"),
        ),
        # transformers renames the older "mamba" and "attention" as it loads the config.
        layer_names=frozenset(
            {"full_attention", "linear_attention", "moe", "mlp", "mamba", "attention"}
        ),
    ),
    # Measured from the sub-configs their models pass their rotary modules.
    "blt": Family(
        unanswered="its local encoder, global transformer, local decoder and entropy patcher "
        "each turn a rope of their own, of other bases and head widths, over layers each numbers "
        "from 0: one answer's layers cannot say which stack a layer is in. Send each of "
        "encoder_config, global_config, decoder_config and patcher_config alone: each is "
        "answered"
    ),
    # Every layer turns pairs (2i, 2i+1) of the trailing qk_rope_head_dim of its 512-wide
    # heads, by the rope labelled main (sliding_attention layers) or compress (the compressed
    # ones); K=V, so its attention output is turned back by −θ, and its compressor and indexer
    # turn their keys (and the indexer's queries, the trailing part of their heads) by the
    # compress rope at the positions they stand for.
    "deepseek_v4": Family(
        layout="interleaved",
        rope_at_end=True,
        rope_labels=(
            ("sliding_attention", "main"),
            ("compressed_sparse_attention", "compress"),
            ("heavily_compressed_attention", "compress"),
        ),
        layer_names=frozenset(
            {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"}
        ),
    ),
    # An nn.Embedding of sinusoids that create_weight fills in NumPy float64 (base 10000, the
    # head hidden_size / num_attention_heads, whatever else the config says), the table's
    # frequencies then repeated pairwise: pairs (2i, 2i+1).
    "roformer": Family(
        layout="interleaved",
        framework_precision="float64",
        reads=frozenset(
            {
                "model_type",
                "hidden_size",
                "num_attention_heads",
                "num_hidden_layers",
                "max_position_embeddings",
            }
        ),
        refused_flags=(("rotary_value", "RoFormer then turns the values too: not answered"),),
    ),
    # Its rotate_half turns each pair of the cache the other way (by −θ: its sin negated).
    "nanochat": Family(apply="reversed"),
}

UNANSWERED_KEYS: dict[str, str] = {
    "text_config": "must be the text model's config, an object, at a place the reader looks "
    "(text_config, vlm_config.text_config, thinker_config.text_config …)",
    "mrope_section": "multimodal rope (M-RoPE) is not answered yet",
}

# Where a config class's get_text_config finds its text model, where that is not one of
# TEXT_CONFIGS (Dia's decoder); or, for a model with no text model, the sub-config it passes
# its rotary module (Nemotron3-Diarization's audio encoder, whose rope turns its frames).
OWN_TEXT_CONFIGS = {"dia": "decoder_config", "nemotron3_diarization": "audio_config"}

# Multimodal configs whose text model's keys may sit at their top (checkpoints written before
# the text config was nested): transformers folds them into that text model's config, read as
# its model type.
FLAT_TEXT_TYPES = {"hunyuan_vl": "hunyuan_vl_text"}

# Where a multimodal config keeps its text model's, in the order transformers looks.
TEXT_CONFIGS = (
    "text_encoder",
    "decoder",
    "generator",
    "text_config",
    "vlm_config.text_config",
    "thinker_config.text_config",  # Qwen-Omni: the thinker is the text model
)

# Layer types without softmax attention: no rope is applied there.
ATTENTION_FREE = frozenset({"conv", "linear_attention", "mamba", "mamba2", "recurrent"})

# Keys listing layers that have no rope (Mllama's cross-attention layers).
NOPE_LAYER_LISTS = ("cross_attention_layers",)


# Config flags that say whether q/k turn in other pairs than the cache's layout (DeepSeek V3);
# absent, the family's default holds.
APPLY_KEYS = {"rope_interleave": "interleaved_to_rotate_half"}
