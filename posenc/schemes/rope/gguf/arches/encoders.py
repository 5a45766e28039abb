"""Rows of encoders (embedding and reranking models): bidirectional attention, the same ropes."""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import Arch, Swa

ROWS: tuple[Arch, ...] = (
    # BERT: llama_model_rope_type says NEOX; its graph adds learned absolute positions.
    Arch(
        "bert",
        "neox",
        "models/bert.cpp",
        rope_call=False,
        note="llama_model_rope_type gives bert NEOX, but its graph adds learned absolute "
        "position embeddings (position_embd) and turns no rope",
    ),
    # Nomic BERT (and its MoE) and Jina v3 run BERT's graph, which rotates for them.
    Arch("nomic-bert", "neox", "models/nomic-bert.cpp", graph="models/bert.cpp"),
    Arch("nomic-bert-moe", "neox", "models/nomic-bert-moe.cpp", graph="models/bert.cpp"),
    Arch("jina-bert-v3", "neox", "models/jina-bert-v3.cpp", graph="models/bert.cpp"),
    Arch("eurobert", "neox", "models/eurobert.cpp"),
    # ModernBERT: global layers every third from the first, local ones at their own base.
    Arch(
        "modern-bert",
        "neox",
        "models/modern-bert.cpp",
        swa=Swa(3, dense_first=True, when="window", base="key_or_10000", scale="one"),
    ),
    # EmbeddingGemma: Gemma 3's pattern, its window always on (symmetric).
    Arch(
        "gemma-embedding",
        "neox",
        "models/gemma-embedding.cpp",
        swa=Swa(6, base="key_or_10000", scale="one"),
    ),
)
