"""Rows of NEOX architectures without sliding layers: pairs ``(i, i + n_rot/2)``,
transformers' ``rotate_half`` on the unpermuted weights the converter writes."""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import PLAIN, Arch, Extra

ROWS: tuple[Arch, ...] = (
    # Apertus: NEOX on unpermuted weights, with Llama 3's factor tensor.
    Arch("apertus", "neox", "models/apertus.cpp", factors="by_scaling"),
    Arch("qwen", "neox", "models/qwen.cpp"),
    Arch("qwen2", "neox", "models/qwen2.cpp"),
    Arch("qwen2moe", "neox", "models/qwen2moe.cpp"),
    Arch("qwen3", "neox", "models/qwen3.cpp"),
    Arch("qwen3moe", "neox", "models/qwen3moe.cpp"),
    Arch("phi2", "neox", "models/phi2.cpp"),
    Arch("phi3", "neox", "models/phi3.cpp", factors="long_short"),
    # PhiMoE runs Phi-3's graph; its factors are created n_embd_head/2 long.
    Arch(
        "phimoe",
        "neox",
        "models/phimoe.cpp",
        graph="models/phi3.cpp",
        factors="long_short",
        factor_length="head",
    ),
    Arch("gemma", "neox", "models/gemma.cpp"),
    Arch("olmoe", "neox", "models/olmoe.cpp"),
    Arch("exaone", "neox", "models/exaone.cpp", factors="freqs"),
    Arch("starcoder2", "neox", "models/starcoder2.cpp"),
    Arch("stablelm", "neox", "models/stablelm.cpp"),
    Arch("gptneox", "neox", "models/gptneox.cpp"),
    Arch("falcon", "neox", "models/falcon.cpp", n_rot_is_head=True),
    Arch("orion", "neox", "models/orion.cpp"),
    Arch("nemotron", "neox", "models/nemotron.cpp"),
    Arch("codeshell", "neox", "models/codeshell.cpp"),
    Arch("seed_oss", "neox", "models/seed-oss.cpp"),
    Arch("minicpm3", "neox", "models/minicpm3.cpp", factors="long_short", attention=("q", "k_pe")),
    Arch("bitnet", "neox", "models/bitnet.cpp"),
    Arch("dbrx", "neox", "models/dbrx.cpp"),
    Arch("dots1", "neox", "models/dots1.cpp"),
    Arch("dream", "neox", "models/dream.cpp"),
    Arch("grovemoe", "neox", "models/grovemoe.cpp"),
    Arch("jais2", "neox", "models/jais2.cpp"),
    Arch("llada-moe", "neox", "models/llada-moe.cpp"),
    Arch("minimax-m2", "neox", "models/minimax-m2.cpp"),
    # MiniMax-M3: with flash attention its sparse layers (from leading_dense_block_count on)
    # run an indexer whose q and k turn as the attention's.
    Arch(
        "minimax-m3",
        "neox",
        "models/minimax-m3.cpp",
        extras=(
            Extra(
                ("indexer_q", "indexer_k"),
                "after_dense_lead",
                note="only with flash attention on (MSA); without it llama.cpp runs dense "
                "attention and no indexer",
            ),
        ),
    ),
    Arch("rnd1", "neox", "models/rnd1.cpp"),
    Arch("talkie", "neox", "models/talkie.cpp"),
    Arch("hunyuan-moe", "neox", "models/hunyuan-moe.cpp"),
    Arch("bailingmoe2", "neox", "models/bailingmoe2.cpp"),
    Arch("openelm", "neox", "models/openelm.cpp"),
    Arch("plamo", "neox", "models/plamo.cpp"),
    Arch("hy_v3", "neox", "models/hy-v3.cpp", mtp="draft"),
    # HRM: block_count counts the cache slots of its cycles; each slot turns q and k once.
    Arch("hrm_text", "neox", "models/hrm-text.cpp"),
    # Pangu Embedded creates long/short or rope_freqs tensors but its graph passes none.
    Arch(
        "pangu-embedded",
        "neox",
        "models/pangu-embed.cpp",
        factors="by_scaling",
        factor_layers="none",
    ),
    # Grok: YaRN's ext_factor, attention factor and betas from its own keys (beta_fast 8).
    Arch("grok", "neox", "models/grok.cpp", yarn_keys="grok"),
    # HunYuan dense runs HunYuan-VL's hparams and graph: XDRoPE's NTK alpha raises the base.
    # With sections its graph calls ggml_rope_multi in NEOX mode, which ignores them.
    Arch(
        "hunyuan-dense",
        "neox",
        "models/hunyuan-vl.cpp",
        base_alpha=True,
        sections="optional",
        sections_type="neox",
    ),
    # CogVLM: ggml_rope (base 10000, no scaling) whatever the file's keys say.
    Arch(
        "cogvlm",
        "neox",
        "models/cogvlm.cpp",
        factors="freqs",
        factor_layers="none",
        full=PLAIN,
        note="CogVLM's graph calls ggml_rope, which takes base 10000 and no scaling whatever "
        "the file's rope keys say",
    ),
)
