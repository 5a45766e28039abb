"""Rows of architectures with sliding-window layers: which layers slide, which base and scale
their ``rope_freq_base_train_swa``/``rope_freq_scale_train_swa`` hold, and which the graph
passes (``get_rope_freq_base`` gives the sliding base, ``freq_base`` the context's)."""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import NO_YARN, Arch, Form, Swa

# The graph passes the context's base and scale to every layer, sliding or not.
_CONTEXT = Form()
# Gemma 3 and its kin: a sliding base of its own (10000 unless rope.freq_base_swa), no scaling.
_GEMMA = Swa(6, when="window", base="key_or_10000", scale="one")

ROWS: tuple[Arch, ...] = (
    Arch("gemma2", "neox", "models/gemma2.cpp", swa=Swa(2)),
    Arch("gemma3", "neox", "models/gemma3.cpp", swa=_GEMMA),
    # Gemma 3n: layers from 20 on reuse an earlier layer's K, so only q turns there.
    Arch(
        "gemma3n",
        "neox",
        "models/gemma3n.cpp",
        swa=Swa(5, base="key_or_10000", scale="one"),
        kv_shared="fixed",
        kv_from_start=20,
    ),
    # Gemma 4: full layers get rope_freqs (proportional rope: the pairs past the rotary
    # fraction have factor 1e30, frozen) and their own n_rot; sliding ones the local base.
    Arch(
        "gemma4",
        "neox",
        "models/gemma4.cpp",
        swa=Swa(None, base="key_or_10000", scale="one"),
        full=Form(dims="layer"),
        sliding=Form(dims="layer", base="swa", scale="swa"),
        factors="freqs",
        factor_layers="full",
        factor_length="head",
        kv_shared="key",
    ),
    Arch(
        "gemma4-assistant",
        "neox",
        "models/gemma4-assistant.cpp",
        swa=Swa(None, base="key_or_10000", scale="one"),
        full=Form(dims="layer"),
        sliding=Form(dims="layer", base="swa", scale="swa"),
        factors="freqs",
        factor_layers="full",
        factor_length="head",
        attention=("q",),
        layers_are_nextn=True,
        note="Gemma 4's assistant is a draft head: its layers are all nextn layers, which its "
        "graph runs beside the target model's context, turning q only (k is the target's)",
    ),
    Arch(
        "cohere2",
        "norm",
        "models/cohere2.cpp",
        swa=Swa(4),
        sliding=_CONTEXT,
        rope_on="sliding",
    ),
    # Command A MoE: its sliding layers and its leading dense layers rotate.
    Arch(
        "cohere2moe",
        "norm",
        "models/cohere2moe.cpp",
        swa=Swa(4, dense_first=True),
        sliding=_CONTEXT,
        rope_on="sliding_or_dense_lead",
        mtp="draft",
    ),
    Arch(
        "olmo2",
        "neox",
        "models/olmo2.cpp",
        swa=Swa(4, when="window", scale="one"),
        sliding=NO_YARN,
    ),
    Arch(
        "exaone4",
        "neox",
        "models/exaone4.cpp",
        factors="freqs",
        swa=Swa(4, when="layers", when_layers=64),
        sliding=_CONTEXT,
        rope_on="sliding_or_no_swa",
    ),
    Arch(
        "exaone-moe",
        "neox",
        "models/exaone-moe.cpp",
        factors="freqs",
        swa=Swa(4),
        sliding=_CONTEXT,
        rope_on="sliding",
    ),
    Arch("gpt-oss", "neox", "models/openai-moe.cpp", swa=Swa(2)),
    # AFMoE: every fourth layer is full and NoPE (n_no_rope_layer_step's default 4).
    Arch("afmoe", "neox", "models/afmoe.cpp", swa=Swa(4, when="window"), nope_step=4),
    # Laguna: sliding layers are plain rope over their own width, full ones YaRN.
    Arch(
        "laguna",
        "neox",
        "models/laguna.cpp",
        swa=Swa(4, dense_first=True, when="window", scale="one"),
        sliding=Form(
            dims="layer",
            base="swa",
            scale="swa",
            yarn=False,
            betas=False,
            n_ctx_orig="train",
            factors=False,
        ),
    ),
    Arch(
        "maple",
        "neox",
        "models/maple.cpp",
        swa=Swa(None),
        sliding=Form(dims="layer", base="swa", scale="swa"),
        rope_on="sliding",
    ),
    Arch(
        "mellum",
        "neox",
        "models/mellum.cpp",
        swa=Swa(4, when="window"),
        sliding=NO_YARN,
    ),
    Arch(
        "mimo2",
        "neox",
        "models/mimo2.cpp",
        swa=Swa(None, base="key_or_10000", scale="one"),
        mtp="draft",
    ),
    # MUSE Glimmer: only the sliding layers rotate; the full ones are NoPE.
    Arch(
        "muse-glimmer",
        "norm",
        "models/muse-glimmer.cpp",
        swa=Swa(4, scale="one"),
        rope_on="sliding",
        permuted=True,
    ),
    Arch(
        "plamo3",
        "neox",
        "models/plamo3.cpp",
        swa=Swa(8, when="window", base="key_or_10000", scale="one"),
    ),
    # SmallThinker: with sliding layers, the dense-first full ones (il % 4 == 0) are NoPE.
    Arch(
        "smallthinker",
        "neox",
        "models/smallthinker.cpp",
        swa=Swa(4, dense_first=True, when="window"),
        nope_step=4,
        nope_first=True,
        nope_without_swa="none",
    ),
    Arch(
        "spark2_5",
        "neox",
        "models/spark2-5.cpp",
        swa=Swa(None),
        full=Form(dims="layer"),
        sliding=Form(dims="layer", base="swa", scale="swa"),
    ),
    # Step-3.5: full layers rotate half of rope.dimension_count, with the factor tensor.
    Arch(
        "step35",
        "neox",
        "models/step35.cpp",
        swa=Swa(None, base="key_or_10000", scale="one"),
        full=Form(dims="layer"),
        sliding=Form(dims="layer", base="swa", scale="swa"),
        n_rot_full_halved=True,
        factors="by_scaling",
        factor_layers="full",
        factor_length="n_rot_max",
        mtp="draft",
    ),
    # Granite SWA: the sliding layers use the context's base; attention.rope_pattern's zeros
    # are NoPE layers.
    Arch(
        "granite_swa",
        "norm",
        "models/granite-swa.cpp",
        swa=Swa(None, base="10000", scale="one"),
        sliding=_CONTEXT,
        factors="by_scaling",
        rope_pattern="key",
        permuted=True,
    ),
)
