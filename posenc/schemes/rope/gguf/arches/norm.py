"""Rows of NORM architectures: ``ggml_rope_ext`` on pairs of consecutive head values.

Where llama.cpp's converter permutes Q and K (``LlamaModel.permute`` and its copies) those
pairs are the Hugging Face model's ``rotate_half`` pairs (``permuted``); Llama 4, Command R and
the rest rotate consecutive pairs in their own modelling code too.
"""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import Arch, Swa

ROWS: tuple[Arch, ...] = (
    Arch(
        "llama", "norm", "models/llama.cpp", permuted=True, factors="by_scaling", n_rot_is_head=True
    ),
    # LlamaBidirectionalModel: llama's hparams and graph, without a causal mask.
    Arch(
        "llama-embed",
        "norm",
        "models/llama.cpp",
        permuted=True,
        factors="by_scaling",
        n_rot_is_head=True,
    ),
    Arch(
        "deci", "norm", "models/deci.cpp", permuted=True, factors="by_scaling", n_rot_is_head=True
    ),
    Arch(
        "mistral3",
        "norm",
        "models/mistral3.cpp",
        permuted=True,
        factors="by_scaling",
        yarn_keys="mistral3",
    ),
    Arch("arcee", "norm", "models/arcee.cpp", permuted=True, factors="freqs"),
    Arch("baichuan", "norm", "models/baichuan.cpp", permuted=True),
    Arch("internlm2", "norm", "models/internlm2.cpp", permuted=True),
    Arch("xverse", "norm", "models/xverse.cpp", permuted=True),
    Arch("command-r", "norm", "models/command-r.cpp"),
    Arch("olmo", "norm", "models/olmo.cpp", permuted=True),
    Arch(
        "granite",
        "norm",
        "models/granite.cpp",
        permuted=True,
        factors="by_scaling",
        rope_pattern="finetuned",
    ),
    # Granite MoE and MiniCPM run Granite's graph, but neither reads rope.scaling.finetuned:
    # their rope_pattern keeps load_hparams' ones, and every layer rotates.
    Arch(
        "granitemoe",
        "norm",
        "models/granite-moe.cpp",
        graph="models/granite.cpp",
        permuted=True,
        factors="by_scaling",
    ),
    Arch(
        "minicpm",
        "norm",
        "models/minicpm.cpp",
        graph="models/granite.cpp",
        permuted=True,
        factors="by_scaling",
    ),
    # A router layer at index block_count (kept out of n_layer) holds no positions: no rope.
    Arch(
        "graniteswitch",
        "norm",
        "models/granite-switch.cpp",
        permuted=True,
        rope_pattern="finetuned",
        note="Granite Switch's adapter router is an extra single-head layer after the last "
        "(index block_count), outside num_hidden_layers; llama.cpp does not rotate it",
    ),
    Arch("chatglm", "norm", "models/chatglm.cpp"),
    Arch("smollm3", "norm", "models/smollm3.cpp", permuted=True, nope_step=4),
    # Llama 4's converter does not permute: its interleaved complex rope is NORM's own pairs.
    Arch(
        "llama4",
        "norm",
        "models/llama4.cpp",
        factors="freqs",
        swa=Swa(4, when="unless_zero_window"),
        nope_step=4,
        nope_without_swa="last",
    ),
    # ERNIE 4.5 reads rope.dimension_sections (for PaddleOCR) but its rope stays NORM.
    Arch("ernie4_5", "norm", "models/ernie4-5.cpp"),
    Arch("ernie4_5-moe", "norm", "models/ernie4-5.cpp", graph="models/ernie4-5-moe.cpp"),
    Arch("bailingmoe", "norm", "models/bailingmoe.cpp", permuted=True),
    Arch("glm4", "norm", "models/glm4.cpp", sections="optional"),
    Arch("arctic", "norm", "models/arctic.cpp", permuted=True),
    Arch("chameleon", "norm", "models/chameleon.cpp", permuted=True),
    Arch("deepseek", "norm", "models/deepseek.cpp", permuted=True),
    # LLaDA creates rope_freqs but its graph passes no factors.
    Arch("llada", "norm", "models/llada.cpp", permuted=True, factors="freqs", factor_layers="none"),
    Arch("maincoder", "norm", "models/maincoder.cpp"),
    Arch(
        "nanbeige",
        "norm",
        "models/nanbeige.cpp",
        permuted=True,
        factors="freqs",
        loops=True,
        note="Nanbeige runs its block_count layers num_loops times: llama.cpp's layers past "
        "block_count are the same weights again, with the same rope",
    ),
    Arch("pockettts", "norm", "models/pockettts.cpp"),
    Arch(
        "eagle3",
        "norm",
        "models/eagle3.cpp",
        permuted=True,
        factors="freqs",
        note="EAGLE-3 is a draft model: llama.cpp runs it beside its target model's context",
    ),
    Arch("neo-bert", "norm", "models/neo-bert.cpp"),
    # GPT BigCode: llama_model_rope_type says NORM; its graph adds learned absolute positions.
    Arch(
        "starcoder",
        "norm",
        "models/starcoder.cpp",
        rope_call=False,
        note="llama_model_rope_type gives starcoder NORM, but its graph adds learned absolute "
        "position embeddings (position_embd) and calls no rope",
    ),
)
