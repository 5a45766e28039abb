"""The fields of a row: what one architecture's llama.cpp files say of its rope, as data.

A row answers three questions, each from the files it names. Which ``ggml_rope_ext`` call
does a layer get (:class:`Form`: where each argument comes from, for the full layers and the
sliding ones)? Which layers get none (NoPE steps, recurrent layers, layers rotated only when
they slide, a ``rope_pattern``)? And what else turns in the same layer (:class:`Extra`: an
indexer's q and k), or turns in a way no ``ggml_rope_ext`` call states (:class:`Unstated`)?
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from posenc.schemes.rope.recipes.llama_cpp import RopeType


@dataclass(frozen=True)
class Form:
    """Where a layer's ``ggml_rope_ext`` takes each argument from, as its graph passes them.

    The defaults are the graph context's own (``llm_graph_context``): ``n_rot`` of layer 0,
    ``cparams.rope_freq_base`` and ``rope_freq_scale``, YaRN's ``ext_factor`` and
    ``attn_factor``, ``beta_fast``/``beta_slow``, ``n_ctx_orig_yarn``, the layer's factor tensor
    (``get_rope_factors``) and the architecture's rope type.
    """

    # n_rot: the graph's n_rot (hparams.n_rot() is layer 0's: n_rot_swa when layer 0 slides);
    # layer: hparams.n_rot(il); head: n_embd / n_head (DeepSeek-OCR's NEOX call).
    dims: Literal["n_rot", "layer", "head"] = "n_rot"
    # context: cparams.rope_freq_base; swa: get_rope_freq_base (the sliding layers' base);
    # 10000: ggml_rope's fixed base; compress: DeepSeek-V4's compress_rope_freq_base.
    base: Literal["context", "swa", "10000", "compress"] = "context"
    scale: Literal["context", "swa", "one"] = "context"
    # ext_factor and attn_factor from the context; False: 0 and 1.
    yarn: bool = True
    # DeepSeek-V4's attention factor: 1/(1 + 0.1·ln(1/freq_scale)) with ext_factor ≠ 0, else 1.
    dsv4_attn: bool = False
    # beta_fast and beta_slow from the context; False: 0 and 0.
    betas: bool = True
    # context: n_ctx_orig_yarn; train: n_ctx_train; zero: 0 (ggml_rope's).
    n_ctx_orig: Literal["context", "train", "zero"] = "context"
    # The layer's factor tensor is passed (the row's factor_layers say which layers have one).
    factors: bool = True
    # None: the architecture's rope type; else this mode whatever the type.
    mode: RopeType | None = None


# ggml_rope(ctx, a, pos, n_dims, mode): base 10000, no scaling, n_ctx_orig 0, betas 0.
PLAIN = Form(base="10000", scale="one", yarn=False, betas=False, n_ctx_orig="zero", factors=False)
# A rope with YaRN switched off by the graph (sliding layers of Mellum, OLMo 3).
NO_YARN = Form(scale="one", yarn=False, factors=False)


@dataclass(frozen=True)
class Swa:
    """An architecture's sliding-window layers and the hparams its sliding layers' base and
    scale hold (``rope_freq_base_train_swa``, ``rope_freq_scale_train_swa``).

    ``load_swa_pattern(ml, pattern, dense_first)``: the key ``attention.sliding_window_pattern``
    as an array of flags per layer, or a number (default ``pattern``) for ``set_swa_pattern``:
    layer ``il`` slides when ``il % n < n − 1`` (``il % n != 0`` dense first; every layer with
    ``n = 0``). ``pattern=None``: the array is required (``ml.get_arr``).
    """

    pattern: int | None
    dense_first: bool = False
    # When the layers slide at all: always; only with attention.sliding_window > 0 (Gemma 3,
    # OLMo 2); only with this many layers (EXAONE 4.0's 32B); Llama 4: unless
    # attention.sliding_window is present and 0.
    when: Literal["always", "window", "layers", "unless_zero_window"] = "always"
    when_layers: int = 0
    # rope_freq_base_train_swa: the key rope.freq_base_swa, else the full layers' base
    # (copied first), else llama_hparams' own 10000; "key": the key, required (dots.llm3);
    # "base", "10000": the full layers' base or 10000, the key not read.
    base: Literal["key_or_base", "key_or_10000", "key", "base", "10000"] = "key_or_base"
    # rope_freq_scale_train_swa: the full layers' (copied) or llama_hparams' own 1.
    scale: Literal["full", "one"] = "full"


@dataclass(frozen=True)
class Extra:
    """A second rope in the same layers: what it turns, on which layers, with which call."""

    applies_to: tuple[str, ...]
    # all; full: the layers that do not slide; typed: attention.indexer.types (or the row's
    # default); after_dense_lead: layers from leading_dense_block_count on; compressed: layers
    # whose attention.compress_ratios entry is not 0.
    layers: Literal["all", "full", "typed", "after_dense_lead", "compressed"]
    form: Form = Form()
    # Runs only when this key (under the architecture) is present and above 0.
    when_key: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Unstated:
    """A rope llama.cpp applies on these layers that no ``ggml_rope_ext`` call states, and why."""

    applies_to: tuple[str, ...]
    layers: Literal["all", "compressed"]
    reason: str


@dataclass(frozen=True)
class Arch:
    """One architecture's rope in llama.cpp. ``source`` is the file its rules were read from;
    ``graph``, the file whose graph it runs when that is another's."""

    name: str
    rope_type: RopeType
    source: str
    graph: str | None = None
    # rope.dimension_sections: "required" (M-RoPE models), "optional" with the type becoming
    # sections_type when the first two are set (hparams.use_mrope), "any" when any is set
    # (DFlash drafts of M-RoPE targets), or not read.
    sections: Literal["none", "optional", "required", "any"] = "none"
    sections_type: RopeType = "mrope"
    # The factor tensors its load_tensors creates: rope_freqs.weight ("freqs"),
    # rope_factors_long/short.weight ("long_short", chosen by the context's length), long/short
    # with rope.scaling.type longrope and rope_freqs otherwise ("by_scaling"); "none": any such
    # tensor makes llama.cpp refuse the file (a tensor it did not create).
    factors: Literal["none", "freqs", "long_short", "by_scaling"] = "none"
    # Which layers' calls get the factor tensor (get_rope_factors, or rope_freqs directly): all;
    # the full ones (Gemma 4's proportional rope, Step-3.5); none (created, never passed).
    factor_layers: Literal["all", "full", "none"] = "all"
    # The factor tensor's length: n_rot/2; head/2 (n_embd_head); the widest layer's n_rot/2.
    factor_length: Literal["n_rot", "head", "n_rot_max"] = "n_rot"
    swa: Swa | None = None
    full: Form = Form()
    sliding: Form = Form(base="swa", scale="swa")
    # DeepSeek-V4: layers with a compress ratio take this form.
    compressed: Form | None = None
    # Which layers rotate at all: every one; only the sliding ones (Cohere 2); the sliding
    # ones unless no layer slides (EXAONE 4.0); the sliding ones and the leading dense ones.
    rope_on: Literal["all", "sliding", "sliding_or_no_swa", "sliding_or_dense_lead"] = "all"
    # n_no_rope_layer_step: (il + 1) % step == 0 is NoPE (il % step == 0 with nope_first).
    nope_step: int = 0
    nope_first: bool = False
    # Without sliding layers the step becomes the layer count: Llama 4's last layer stays NoPE
    # ("last"), SmallThinker rotates every layer ("none").
    nope_without_swa: Literal["keep", "last", "none"] = "keep"
    # rope_pattern: every layer rotates iff rope.scaling.finetuned (default true: Granite), or
    # the per-layer flags of attention.rope_pattern (Granite SWA).
    rope_pattern: Literal["none", "finetuned", "key"] = "none"
    # Layers without attention, so without rope: "interval" (attention.recurrent_layers, else
    # all but every full_attention_interval-th, default recurrent_interval), "kv_heads" (a
    # layer whose attention.head_count_kv is 0: LFM2, Granite 4, PLaMo 2).
    recurrent: Literal["none", "interval", "kv_heads"] = "none"
    recurrent_interval: int = 4
    # Layers from n_layer_kv_from_start on reuse an earlier layer's K: only q turns.
    # fixed: kv_from_start (Gemma 3n's 20); key: block_count − attention.shared_kv_layers.
    kv_shared: Literal["none", "fixed", "key"] = "none"
    kv_from_start: int = 0
    # What the attention rope turns (cb names of the graph's rotated tensors).
    attention: tuple[str, ...] = ("q", "k")
    extras: tuple[Extra, ...] = ()
    # Indexer types when attention.indexer.types is absent (GLM-5.2's constant), for files whose
    # context_length is at least typed_from_context; below it, every layer has one.
    typed_default: tuple[int, ...] = ()
    typed_from_context: int = 0
    unstated: tuple[Unstated, ...] = ()
    # Layers past block_count − nextn_predict_layers: a draft context's multi-token-prediction
    # head runs them ("draft": the model has an MTP graph), or nothing does ("kept").
    mtp: Literal["kept", "draft"] = "kept"
    # Gemma 4's assistant: every block is a draft layer (nextn_predict_layers = block_count),
    # and its graph runs them all.
    layers_are_nextn: bool = False
    # llama_model_rope_type gives a rope, but the graph calls none (BERT, StarCoder).
    rope_call: bool = True
    note: str | None = None
    # Reads rope.scaling.yarn_beta_fast / _slow / yarn_log_multiplier (Mistral 3), or also
    # yarn_ext_factor and yarn_attn_factor with beta_fast 8 by default (Grok).
    yarn_keys: Literal["none", "mistral3", "grok"] = "none"
    # Reads rope.scaling.yarn_log_multiplier divided by 0.1 (the DeepSeek family's converters
    # write 0.1·mscale_all_dim).
    log_mul_divided: bool = False
    # llama-context.cpp's DeepSeek-V2 special case: mscale = mscale_all_dim when not 1.
    mscale_is_log_mul: bool = False
    # load_hparams throws unless rope.dimension_count equals the head width.
    n_rot_is_head: bool = False
    # Step-3.5: full layers rotate half of rope.dimension_count.
    n_rot_full_halved: bool = False
    # HunYuan: with rope.scaling.alpha > 0 the base is base·alpha^(d/(d−2)) (d the head width).
    base_alpha: bool = False
    # Nanbeige: the layers run num_loops times over (logical layers past block_count).
    loops: bool = False
    # llama.cpp's converter permutes this architecture's Q/K weights (LlamaModel.permute and its
    # copies), so NORM's consecutive pairs on the file's weights are the Hugging Face model's
    # rotate_half pairs: the model's layout is "split" though the file's rope is NORM.
    permuted: bool = False
    # A second row for files with this key above 0 (DFlash's DeepSeek-V4 drafts).
    variant: tuple[str, Arch] | None = None
