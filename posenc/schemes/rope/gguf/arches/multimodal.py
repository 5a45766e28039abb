"""Rows of M-RoPE architectures: NEOX pairs whose frequencies turn by temporal, height and
width ids in sections (interleaved for IMROPE), on text positions (t = h = w) NEOX's own
table; and those that switch to M-RoPE when the file carries sections."""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches.fields import Arch, Form, Swa

ROWS: tuple[Arch, ...] = (
    Arch("qwen2vl", "mrope", "models/qwen2vl.cpp", sections="required"),
    Arch("qwen3vl", "imrope", "models/qwen3vl.cpp", sections="required"),
    Arch("qwen3vlmoe", "imrope", "models/qwen3vlmoe.cpp", sections="required"),
    # Qwen3-TTS's talker reuses Qwen3-VL's hparams and graph.
    Arch(
        "qwen3tts",
        "imrope",
        "models/qwen3vl.cpp",
        sections="required",
    ),
    # PaddleOCR-VL: ERNIE 4.5's hparams, Qwen2-VL's M-RoPE graph (ggml divides by the
    # sections' sum: a file without them cannot run).
    Arch(
        "paddleocr",
        "mrope",
        "models/ernie4-5.cpp",
        graph="models/paddleocr.cpp",
        sections="required",
    ),
    # GLM-4.5/4.6/4.7 (and their vision variants with sections): partial rotary through
    # rope.dimension_count; the multi-token-prediction layer runs in a draft context only.
    Arch("glm4moe", "neox", "models/glm4-moe.cpp", sections="optional", mtp="draft"),
    Arch(
        "hunyuan_vl",
        "neox",
        "models/hunyuan-vl.cpp",
        sections="optional",
        base_alpha=True,
    ),
    # DFlash drafts: M-RoPE when the target's sections are carried, rope_freqs of layer 0
    # otherwise; a DeepSeek-V4 DSpark draft (hyper_connection.count > 0) runs DeepSeek-V4
    # blocks, NORM, plain rope at the base.
    Arch(
        "dflash",
        "neox",
        "models/dflash.cpp",
        sections="any",
        swa=Swa(None, when="window", base="base"),
        sliding=Form(),
        factors="freqs",
        factor_length="head",
        note="DFlash is a draft model: llama.cpp runs it beside its target model's context",
        variant=(
            "hyper_connection.count",
            Arch(
                "dflash",
                "norm",
                "models/dflash.cpp",
                attention=("q", "kv"),
                full=Form(scale="one", yarn=False, betas=False, n_ctx_orig="zero", factors=False),
                note="a DeepSeek-V4 DSpark draft: llama.cpp runs it beside its target model's "
                "context",
            ),
        ),
    ),
)
