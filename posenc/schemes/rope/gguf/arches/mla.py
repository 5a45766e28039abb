"""Rows of DeepSeek's multi-head latent attention and its kin: the rope turns ``q_pe`` and
``k_pe`` (the rotated slices of the query and the shared key), and where the model has a
lightning indexer, a second rope turns the indexer's q and k in the same layers."""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import Arch, Extra, Form, Swa, Unstated

_MLA = ("q_pe", "k_pe")
_INDEXER = ("indexer_q", "indexer_k")

# GLM-5.2's indexer types when the file has none (glm-dsa.cpp, GLM_5_2_DEFAULT_INDEXER_TYPES):
# the first three layers and every fourth from the sixth.
_GLM_5_2_INDEXERS = (1, 1) + (1, 0, 0, 0) * 19

ROWS: tuple[Arch, ...] = (
    Arch(
        "deepseek2",
        "norm",
        "models/deepseek2.cpp",
        attention=_MLA,
        log_mul_divided=True,
        mscale_is_log_mul=True,
        mtp="draft",
    ),
    # Mistral 4 (Mistral Large 3): DeepSeek-V2's hparams and graph, but llama-context.cpp's
    # mscale special case is DeepSeek-V2's alone.
    Arch(
        "mistral4",
        "norm",
        "models/deepseek2.cpp",
        attention=_MLA,
        log_mul_divided=True,
    ),
    # DeepSeek-OCR: DeepSeek-V2's graph without MLA, a NEOX rope over n_embd/n_head fixed at
    # base 10000 (asserted) with no scaling.
    Arch(
        "deepseek2-ocr",
        "norm",
        "models/deepseek2ocr.cpp",
        graph="models/deepseek2.cpp",
        full=Form(
            dims="head",
            mode="neox",
            scale="one",
            yarn=False,
            betas=False,
            n_ctx_orig="zero",
            factors=False,
        ),
    ),
    # DeepSeek-V3.2: its lightning indexer turns its q and k with NEOX pairs, the MLA NORM.
    Arch(
        "deepseek32",
        "norm",
        "models/deepseek32.cpp",
        attention=_MLA,
        extras=(Extra(_INDEXER, "all", Form(mode="neox")),),
        log_mul_divided=True,
        mtp="draft",
    ),
    # GLM-5 (DSA): the indexer, NORM too, on the layers attention.indexer.types marks.
    Arch(
        "glm-dsa",
        "norm",
        "models/glm-dsa.cpp",
        attention=_MLA,
        extras=(Extra(_INDEXER, "typed", Form(mode="norm")),),
        typed_default=_GLM_5_2_INDEXERS,
        typed_from_context=1048576,
        mtp="draft",
    ),
    # dots.llm3: MLA on every layer (sliding ones at the sliding base, a required key), the
    # indexer on the full layers; its MTP block has no graph yet.
    Arch(
        "dots3note",
        "norm",
        "models/dots3note.cpp",
        attention=_MLA,
        swa=Swa(None, base="key", scale="one"),
        sliding=Form(base="swa"),
        extras=(Extra(_INDEXER, "full", Form(mode="neox")),),
    ),
    # HY-V4: MLA, and on the layers attention.indexer.types marks (with indexer.top_k > 0) an
    # indexer whose q and k turn as the MLA's.
    Arch(
        "hy_v4",
        "norm",
        "models/hy-v4.cpp",
        attention=_MLA,
        extras=(Extra(_INDEXER, "typed", when_key="attention.indexer.top_k"),),
    ),
    # PLM: the whole q turns (its nope part first, offset), and the shared k_pe.
    Arch("plm", "norm", "models/plm.cpp", attention=("q", "k_pe")),
    # Ling 3 (BailingMoeV3): MLA on its attention layers (head_count_kv ≠ 0; the others are
    # KDA), M-RoPE with sections.
    Arch(
        "bailingmoe3",
        "norm",
        "models/bailingmoe3.cpp",
        sections="optional",
        attention=_MLA,
        recurrent="kv_heads",
        mtp="draft",
    ),
    # DeepSeek-V4: q and kv turn at the compress base with YaRN on compressed layers, plain at
    # the base on the others; the compressor's and indexer's ropes turn compressed positions.
    Arch(
        "deepseek4",
        "norm",
        "models/deepseek4.cpp",
        attention=("q", "kv"),
        full=Form(scale="one", yarn=False, betas=False, n_ctx_orig="zero", factors=False),
        compressed=Form(base="compress", dsv4_attn=True, factors=False),
        unstated=(
            Unstated(
                ("compressed_kv", "indexer_q", "output"),
                "compressed",
                "DeepSeek-V4's compressor turns each compressed block's key at the block's "
                "position (comp_pos), its lightning indexer turns q at the compress base, and "
                "the attention output is turned back (ggml_rope_ext_back): positions and an "
                "inverse rope no ggml_rope_ext call of a token's position states",
            ),
        ),
        mtp="draft",
    ),
)
