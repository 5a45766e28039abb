"""llama.cpp's rope rules, one row per architecture: data, not branches.

Read from llama.cpp at :data:`LLAMA_CPP_VERSION`: the rope type of each architecture from
``llama_model_rope_type`` (``src/llama-model.cpp``); the keys every architecture reads and their
defaults from ``llama_model_base::load_hparams`` (a base of 10000, scaling ``linear`` with no
factor, ``n_ctx_orig_yarn`` the training context, ``n_rot`` the head width); each architecture's
own keys and sliding-window layers from its ``load_arch_hparams`` (``src/models/<arch>.cpp``),
``set_swa_pattern`` (``src/llama-hparams.cpp``); which base, scale and factor tensor each layer's
``ggml_rope_ext`` gets from the same file's graph; YaRN's ``ext_factor`` and attention factor
from ``llama_context``'s constructor (``src/llama-context.cpp``), applied in :mod:`.rules`.

An architecture without a row is refused by name: a row is only written after reading its
files, so a missing one means "not read", never "no rope".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LLAMA_CPP_VERSION = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
LLAMA_CPP_SOURCE = "llama-cpp-python 0.3.36 (vendor/llama.cpp)"

RopeType = Literal["norm", "neox", "mrope", "imrope"]


@dataclass(frozen=True)
class Swa:
    """An architecture's sliding-window layers, as its ``load_arch_hparams`` sets them.

    ``load_swa_pattern(ml, pattern, dense_first)``: the key ``attention.sliding_window_pattern``
    as an array of flags per layer, or a number (default ``pattern``) for
    ``set_swa_pattern``: layer ``il`` slides when ``il % n < n − 1`` (``il % n != 0`` dense
    first; every layer with ``n = 0``).
    """

    pattern: int
    dense_first: bool = False
    # When the layers slide at all: always; only with attention.sliding_window > 0 (Gemma 3,
    # OLMo 2); only with this many layers (EXAONE 4.0's 32B).
    # Llama 4: unless attention.sliding_window is present and 0.
    when: Literal["always", "window", "layers", "unless_zero_window"] = "always"
    when_layers: int = 0
    # The sliding layers' base: the key rope.freq_base_swa, else the full layers' base
    # ("swa_key_or_base", hparams copied first), else llama_hparams' own 10000 ("swa_key_or_10000",
    # Gemma 3 copies nothing); or the context's base whatever the key says ("base": the graph
    # passes freq_base).
    base: Literal["swa_key_or_base", "swa_key_or_10000", "base"] = "swa_key_or_base"
    # The sliding layers' freq_scale: the full layers' ("full") or 1 (Gemma 3's default
    # rope_freq_scale_train_swa, OLMo 3's graph).
    scale: Literal["full", "one"] = "full"
    # OLMo 3's sliding layers: ext_factor 0, attn_factor 1, no factor tensor.
    yarn: bool = True
    # Cohere 2 and EXAONE 4.0: only the sliding layers rotate; the full ones are NoPE.
    rope_full_layers: bool = True


@dataclass(frozen=True)
class Arch:
    """One architecture's rope in llama.cpp. ``source`` is the file its rules were read from."""

    name: str
    rope_type: RopeType
    source: str
    # rope.dimension_sections: "required" (M-RoPE models), "optional" with the type becoming
    # ``sections_type`` when present (GLM-4's vision files), or not read.
    sections: Literal["none", "optional", "required"] = "none"
    sections_type: RopeType = "mrope"
    # The factor tensors its load_tensors creates and its graph passes (get_rope_factors):
    # rope_freqs.weight ("freqs"), rope_factors_long/short.weight ("long_short", chosen by the
    # context's length), long/short with rope.scaling.type longrope and rope_freqs otherwise
    # ("by_scaling"); "none": any such tensor makes llama.cpp refuse the file (a tensor it did
    # not create).
    factors: Literal["none", "freqs", "long_short", "by_scaling"] = "none"
    swa: Swa | None = None
    # (il + 1) % step == 0 is NoPE (n_no_rope_layer_step: SmolLM3, Llama 4).
    nope_step: int = 0
    # Llama 4 without sliding layers sets the step to the layer count ("always use rope"),
    # which leaves its last layer NoPE.
    nope_step_is_layers_without_swa: bool = False
    # Hybrids of linear attention: the recurrent layers (attention.recurrent_layers, else all
    # but every full_attention_interval-th, default 4) have no attention and so no rope.
    recurrent: bool = False
    # Granite: every layer rotates iff rope.scaling.finetuned (default true), none otherwise.
    rope_if_finetuned: bool = False
    # Reads rope.scaling.yarn_beta_fast / _slow / yarn_log_multiplier (Mistral 3).
    yarn_keys: bool = False
    # DeepSeek-V2: reads yarn_log_multiplier, divided by 0.1, and takes mscale = mscale_all_dim.
    deepseek_log_mul: bool = False
    # load_hparams throws unless rope.dimension_count equals the head width.
    n_rot_is_head: bool = False
    # llama.cpp's converter permutes this architecture's Q/K weights (LlamaModel.permute and its
    # copies), so NORM's consecutive pairs on the file's weights are the Hugging Face model's
    # rotate_half pairs: the model's layout is "split" though the file's rope is NORM.
    permuted: bool = False


def _rows(*rows: Arch) -> dict[str, Arch]:
    table = {row.name: row for row in rows}
    assert len(table) == len(rows), "an architecture has two rows"
    return table


ARCHES: dict[str, Arch] = _rows(
    # NORM: pairs of consecutive head values (the converter permutes Llama-family Q/K so that
    # these pairs are transformers' rotate_half pairs).
    Arch(
        "llama", "norm", "models/llama.cpp", permuted=True, factors="by_scaling", n_rot_is_head=True
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
        yarn_keys=True,
    ),
    Arch("arcee", "norm", "models/arcee.cpp", permuted=True, factors="freqs"),
    Arch("apertus", "neox", "models/apertus.cpp", factors="by_scaling"),
    Arch("baichuan", "norm", "models/baichuan.cpp", permuted=True),
    Arch("internlm2", "norm", "models/internlm2.cpp", permuted=True),
    Arch("xverse", "norm", "models/xverse.cpp", permuted=True),
    Arch("command-r", "norm", "models/command-r.cpp"),
    Arch(
        "cohere2",
        "norm",
        "models/cohere2.cpp",
        swa=Swa(4, base="base", rope_full_layers=False),
    ),
    Arch("olmo", "norm", "models/olmo.cpp", permuted=True),
    Arch(
        "granite",
        "norm",
        "models/granite.cpp",
        permuted=True,
        factors="by_scaling",
        rope_if_finetuned=True,
    ),
    Arch("deepseek2", "norm", "models/deepseek2.cpp", deepseek_log_mul=True),
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
        nope_step_is_layers_without_swa=True,
    ),
    # ERNIE 4.5 reads rope.dimension_sections (for PaddleOCR) but its rope stays NORM.
    Arch("ernie4_5", "norm", "models/ernie4-5.cpp"),
    Arch("bailingmoe", "norm", "models/bailingmoe.cpp", permuted=True),
    Arch("glm4", "norm", "models/glm4.cpp", sections="optional"),
    Arch("arctic", "norm", "models/arctic.cpp", permuted=True),
    Arch("chameleon", "norm", "models/chameleon.cpp", permuted=True),
    Arch("deepseek", "norm", "models/deepseek.cpp", permuted=True),
    Arch("ernie4_5-moe", "norm", "models/ernie4-5-moe.cpp"),
    # NEOX: pairs (i, i + n_rot/2), transformers' rotate_half on unpermuted weights.
    Arch("qwen", "neox", "models/qwen.cpp"),
    Arch("qwen2", "neox", "models/qwen2.cpp"),
    Arch("qwen2moe", "neox", "models/qwen2moe.cpp"),
    Arch("qwen3", "neox", "models/qwen3.cpp"),
    Arch("qwen3moe", "neox", "models/qwen3moe.cpp"),
    Arch("phi2", "neox", "models/phi2.cpp"),
    Arch("phi3", "neox", "models/phi3.cpp", factors="long_short"),
    Arch("gemma", "neox", "models/gemma.cpp"),
    Arch("gemma2", "neox", "models/gemma2.cpp", swa=Swa(2)),
    Arch(
        "gemma3",
        "neox",
        "models/gemma3.cpp",
        swa=Swa(6, when="window", base="swa_key_or_10000", scale="one"),
    ),
    Arch(
        "olmo2",
        "neox",
        "models/olmo2.cpp",
        swa=Swa(4, when="window", base="base", scale="one", yarn=False),
    ),
    Arch("olmoe", "neox", "models/olmoe.cpp"),
    Arch(
        "exaone4",
        "neox",
        "models/exaone4.cpp",
        factors="freqs",
        swa=Swa(4, when="layers", when_layers=64, base="base", rope_full_layers=False),
    ),
    Arch("exaone", "neox", "models/exaone.cpp", factors="freqs"),
    Arch("starcoder2", "neox", "models/starcoder2.cpp"),
    Arch("stablelm", "neox", "models/stablelm.cpp"),
    Arch("gptneox", "neox", "models/gptneox.cpp"),
    Arch("falcon", "neox", "models/falcon.cpp", n_rot_is_head=True),
    Arch("orion", "neox", "models/orion.cpp"),
    Arch("nemotron", "neox", "models/nemotron.cpp"),
    Arch("codeshell", "neox", "models/codeshell.cpp"),
    Arch("seed_oss", "neox", "models/seed-oss.cpp"),
    Arch("minicpm3", "neox", "models/minicpm3.cpp", factors="long_short"),
    Arch("gpt-oss", "neox", "models/openai-moe.cpp", swa=Swa(2)),
    Arch("bitnet", "neox", "models/bitnet.cpp"),
    Arch("dbrx", "neox", "models/dbrx.cpp"),
    Arch("dots1", "neox", "models/dots1.cpp"),
    Arch("dream", "neox", "models/dream.cpp"),
    Arch("grovemoe", "neox", "models/grovemoe.cpp"),
    Arch("jais2", "neox", "models/jais2.cpp"),
    Arch("llada-moe", "neox", "models/llada-moe.cpp"),
    Arch("minimax-m2", "neox", "models/minimax-m2.cpp"),
    Arch("rnd1", "neox", "models/rnd1.cpp"),
    Arch("talkie", "neox", "models/talkie.cpp"),
    Arch("hunyuan-moe", "neox", "models/hunyuan-moe.cpp"),
    # M-RoPE: NEOX pairs whose frequencies turn by temporal, height and width ids in sections
    # (interleaved for IMROPE); on text positions (t = h = w) NEOX's own table.
    Arch("qwen2vl", "mrope", "models/qwen2vl.cpp", sections="required"),
    Arch("qwen3vl", "imrope", "models/qwen3vl.cpp", sections="required"),
    Arch("qwen3vlmoe", "imrope", "models/qwen3vlmoe.cpp", sections="required"),
    Arch("qwen35", "imrope", "models/qwen35.cpp", sections="required", recurrent=True),
    Arch("qwen35moe", "imrope", "models/qwen35moe.cpp", sections="required", recurrent=True),
    Arch("qwen3next", "neox", "models/qwen3next.cpp", recurrent=True),
)
