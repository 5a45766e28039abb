"""Rows of hybrids: layers of linear attention, convolutions or state spaces (no attention, so
no rope) beside attention layers that rotate."""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import Arch, Extra

ROWS: tuple[Arch, ...] = (
    Arch("qwen3next", "neox", "models/qwen3next.cpp", recurrent="interval", mtp="draft"),
    Arch(
        "qwen35",
        "imrope",
        "models/qwen35.cpp",
        sections="required",
        recurrent="interval",
        mtp="draft",
    ),
    Arch(
        "qwen35moe",
        "imrope",
        "models/qwen35moe.cpp",
        sections="required",
        recurrent="interval",
        mtp="draft",
    ),
    # Qwen4-Exp: its QSA indexer turns q by the token's ids and pooled keys by their block's.
    Arch(
        "qwen4exp",
        "imrope",
        "models/qwen4exp.cpp",
        sections="required",
        recurrent="interval",
        extras=(
            Extra(
                ("indexer_q", "indexer_k"),
                "compressed",
                note="the indexer's keys are pooled over blocks of compress_ratio tokens and "
                "turn at their block's position (blk_pos), its q at the token's",
            ),
        ),
    ),
    # MiniMax-Text-01: lightning attention but every eighth layer.
    Arch("minimax-01", "neox", "models/minimax-01.cpp", recurrent="interval", recurrent_interval=8),
    # Falcon-H1 runs attention and an SSM side by side in every layer: every layer rotates.
    # It creates rope_freqs but passes no factors.
    Arch("falcon-h1", "neox", "models/falcon-h1.cpp", factors="freqs", factor_layers="none"),
    # Layers whose attention.head_count_kv is 0 are convolutions (LFM2) or Mamba (Granite 4,
    # PLaMo 2): only the attention layers rotate.
    Arch("lfm2", "neox", "models/lfm2.cpp", recurrent="kv_heads"),
    Arch("lfm2moe", "neox", "models/lfm2moe.cpp", graph="models/lfm2.cpp", recurrent="kv_heads"),
    Arch(
        "granitehybrid",
        "norm",
        "models/granite-hybrid.cpp",
        recurrent="kv_heads",
        rope_pattern="finetuned",
        factors="freqs",
        permuted=True,
    ),
    Arch("plamo2", "neox", "models/plamo2.cpp", recurrent="kv_heads"),
)
