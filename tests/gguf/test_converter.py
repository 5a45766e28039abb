"""The service's reading of a GGUF held to files llama.cpp's own converter writes: tiny random
transformers models of each family, converted, read back, and compared with what
``/v1/rope/config`` says of the same config (every layer conforms); each finding fires on a file
rewritten with the ``gguf`` package (a tensor or key dropped, a value changed) and is silent on
the faithful one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.schemes.rope.gguf import conformance, reader
from tests.gguf.convert import convert
from tests.hub_configs import llama_4_rope_scaling, llama_31_rope_scaling

pytestmark = pytest.mark.llama_cpp

_SMALL = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
# name: (model_type, config keys beyond _SMALL, the architecture llama.cpp names it)
MODELS: dict[str, tuple[str, dict[str, Any], str]] = {
    "llama3.1": (
        "llama",
        {
            "num_hidden_layers": 2,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": llama_31_rope_scaling(),
        },
        "llama",
    ),
    "mistral": (
        "mistral",
        {"num_hidden_layers": 2, "max_position_embeddings": 32768, "rope_theta": 1e6},
        "llama",
    ),
    "qwen2.5-yarn": (
        "qwen2",
        {
            "num_hidden_layers": 2,
            "max_position_embeddings": 131072,
            "rope_theta": 1e6,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            },
        },
        "qwen2",
    ),
    "qwen3": (
        "qwen3",
        {
            "num_hidden_layers": 2,
            "max_position_embeddings": 40960,
            "rope_theta": 1e6,
            "head_dim": 32,
        },
        "qwen3",
    ),
    "phi3-longrope": (
        "phi3",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "longrope",
                "long_factor": np.linspace(1, 40, 8).tolist(),
                "short_factor": np.linspace(1, 1.5, 8).tolist(),
            },
        },
        "phi3",
    ),
    "gemma3": (
        "gemma3_text",
        {
            "num_hidden_layers": 8,
            "head_dim": 16,
            "max_position_embeddings": 131072,
            "rope_theta": 1e6,
            "rope_local_base_freq": 10000.0,
            "sliding_window": 512,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        },
        "gemma3",
    ),
    "gemma2": (
        "gemma2",
        {
            "num_hidden_layers": 4,
            "head_dim": 16,
            "sliding_window": 512,
            "max_position_embeddings": 8192,
        },
        "gemma2",
    ),
    "command-r": ("cohere", {"num_hidden_layers": 2, "max_position_embeddings": 8192}, "command-r"),
    "cohere2": (
        "cohere2",
        {
            "rotary_pct": 1.0,
            "num_hidden_layers": 8,
            "sliding_window": 512,
            "max_position_embeddings": 8192,
            "rope_theta": 50000.0,
        },
        "cohere2",
    ),
    "olmo2": ("olmo2", {"num_hidden_layers": 2}, "olmo2"),
    "olmo3": (
        "olmo3",
        {
            "num_hidden_layers": 8,
            "sliding_window": 512,
            "max_position_embeddings": 65536,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
            },
        },
        "olmo2",
    ),
    "smollm3": ("smollm3", {"num_hidden_layers": 8}, "smollm3"),
    "granite": ("granite", {"num_hidden_layers": 2}, "granite"),
    "starcoder2": ("starcoder2", {"num_hidden_layers": 2}, "starcoder2"),
    "stablelm": ("stablelm", {"num_hidden_layers": 2, "partial_rotary_factor": 0.25}, "stablelm"),
    "phi-2": ("phi", {"num_hidden_layers": 2, "partial_rotary_factor": 0.5}, "phi2"),
    "qwen2-moe": (
        "qwen2_moe",
        {
            "num_hidden_layers": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
        },
        "qwen2moe",
    ),
    "qwen3-moe": (
        "qwen3_moe",
        {
            "num_hidden_layers": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
        },
        "qwen3moe",
    ),
    "glm4": ("glm4", {"num_hidden_layers": 2, "partial_rotary_factor": 0.5}, "glm4"),
    "deepseek-v2": (
        "deepseek_v2",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "kv_lora_rank": 16,
            "q_lora_rank": None,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 16,
            "v_head_dim": 16,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "max_position_embeddings": 163840,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 40.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 0.707,
                "mscale_all_dim": 0.707,
            },
        },
        "deepseek2",
    ),
    "qwen2-vl": (
        "qwen2_vl",
        {
            "num_hidden_layers": 2,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
            "vision_config": {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2},
        },
        "qwen2vl",
    ),
    "ernie4.5": ("ernie4_5", {"num_hidden_layers": 2}, "ernie4_5"),
    "ernie4.5-moe": (
        "ernie4_5_moe",
        {"num_hidden_layers": 2, "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32},
        "ernie4_5-moe",
    ),
    "gemma": ("gemma", {"num_hidden_layers": 2, "head_dim": 16}, "gemma"),
    "olmoe": (
        "olmoe",
        {"num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 2},
        "olmoe",
    ),
    "nemotron": ("nemotron", {"num_hidden_layers": 2, "partial_rotary_factor": 0.5}, "nemotron"),
    "mixtral": ("mixtral", {"num_hidden_layers": 2, "num_local_experts": 4}, "llama"),
    "falcon": (
        "falcon",
        {
            "num_hidden_layers": 2,
            "new_decoder_architecture": True,
            "num_kv_heads": 2,
            "alibi": False,
        },
        "falcon",
    ),
    # Apertus: NEOX on unpermuted weights, with Llama 3's factor tensor.
    "apertus": ("apertus", {"num_hidden_layers": 2}, "apertus"),
    "arcee": ("arcee", {"num_hidden_layers": 2}, "arcee"),
    "llama4": (
        "llama4_text",
        {
            "num_hidden_layers": 8,
            "head_dim": 16,
            "num_local_experts": 2,
            "intermediate_size_mlp": 128,
            "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192,
            "max_position_embeddings": 262144,
            "rope_theta": 500000.0,
            "rope_scaling": llama_4_rope_scaling(),
        },
        "llama4",
    ),
    "seed-oss": ("seed_oss", {"num_hidden_layers": 2}, "seed_oss"),
}
# Models llama.cpp applies another rope to, as its own source says (the finding that names it).
DIVERGENT: dict[str, tuple[str, dict[str, Any], str]] = {
    # EXAONE 4.0's sliding layers (and the NoPE full ones) exist in llama.cpp only at 64 layers.
    "exaone4": ("exaone4", {"num_hidden_layers": 4, "sliding_window": 512}, "nope_layers"),
    # gpt-oss's YaRN has truncate false; ggml always rounds the ramp's ends.
    "gpt-oss": (
        "gpt_oss",
        {
            "num_hidden_layers": 2,
            "num_local_experts": 4,
            "head_dim": 16,
            "sliding_window": 128,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            },
        },
        "scaling_changed",
    ),
    # Qwen3-VL's IMROPE turns the pairs its sections leave (pair 6 of these 8) by a fourth id,
    # which llama.cpp sets to 0 for a text prompt's tokens; transformers turns them by the
    # temporal id.
    "qwen3-vl": (
        "qwen3_vl",
        {
            "text_config": {
                **_SMALL,
                "num_hidden_layers": 2,
                "head_dim": 16,
                "rope_scaling": {
                    "rope_type": "default",
                    "mrope_section": [2, 3, 3],
                    "mrope_interleaved": True,
                },
            },
            "vision_config": {
                "depth": 1,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 2,
                "out_hidden_size": 64,
                "deepstack_visual_indexes": [0],
            },
        },
        "mrope_fourth_id",
    ),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    import torch
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        Qwen2VLForConditionalGeneration,
        Qwen3VLForConditionalGeneration,
    )

    root = tmp_path_factory.mktemp("converted")
    pairs, configs = [], {}
    torch.manual_seed(0)
    for name, (model_type, keys, _) in {**MODELS, **DIVERGENT}.items():
        nested = "text_config" in keys  # the sizes are the text model's own
        config = AutoConfig.for_model(model_type, **(keys if nested else {**_SMALL, **keys}))
        model_dir = root / name
        # No causal-LM class for these: the whole model, as the Hub has it.
        model: Any
        if model_type == "qwen2_vl":
            model = Qwen2VLForConditionalGeneration(config)  # type: ignore[arg-type]
        elif model_type == "qwen3_vl":
            model = Qwen3VLForConditionalGeneration(config)  # type: ignore[arg-type]
        else:
            model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
        model.save_pretrained(model_dir)
        # Gemma's converter counts the vocabulary of tokenizer.json.
        vocab = {f"t{i}": i for i in range(_SMALL["vocab_size"])}
        tokenizer = {"model": {"vocab": vocab}, "added_tokens": []}
        (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
        configs[name] = json.loads((model_dir / "config.json").read_text())
        pairs.append((model_dir, root / f"{name}.gguf"))
    convert(pairs)
    names = [*MODELS, *DIVERGENT]
    return {name: (out, configs[name]) for name, (_, out) in zip(names, pairs, strict=True)}


def check(file: Path | bytes, config: dict[str, Any], n_ctx: int | None = None) -> dict[str, Any]:
    data = file.read_bytes() if isinstance(file, Path) else file
    return conformance.check(reader.read(data), config, n_ctx, SERVICE_DEFAULTS)


@pytest.mark.parametrize("name", MODELS)
def test_each_converted_model_conforms_at_every_layer(
    converted: dict[str, tuple[Path, dict[str, Any]]], name: str
) -> None:
    file, config = converted[name]
    n_ctx = 4096 if name == "phi3-longrope" else None  # its long factors: a finding past 4096
    result = check(file, config, n_ctx)
    assert result["architecture"] == MODELS[name][2]
    assert result["findings"] == [] and result["conforms"] is True
    layers = sorted([il for r in result["ropes"] for il in r["layers"]] + result["nope_layers"])
    assert layers == list(range(result["model"]["num_hidden_layers"]))
    for rope in result["ropes"]:  # recipe noise, reported beside the verdict
        noise = rope["max_abs_difference"]
        assert noise["positions"][1] == result["n_ctx"] - 1
        # float32 angles: ~16 ulps of the position at most (2^-24 each)
        bound = result["n_ctx"] * 2**-20 + 1e-5
        assert 0 <= noise["exact"] < bound and 0 <= noise["transformers"] < 2 * bound


@pytest.mark.parametrize("name", DIVERGENT)
def test_where_llama_cpp_applies_another_rope_the_finding_names_it(
    converted: dict[str, tuple[Path, dict[str, Any]]], name: str
) -> None:
    file, config = converted[name]
    result = check(file, config)
    assert result["conforms"] is False and kinds(result) == [DIVERGENT[name][2]]


def test_qwen2vls_sections_are_read(converted: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    result = check(*converted["qwen2-vl"])
    assert result["mrope"] == {"section": [2, 3, 3, 0], "interleaved": False}
    assert result["ropes"][0]["ggml"]["mode"] == 8


def test_qwen3vls_interleaved_sections_are_read(
    converted: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    result = check(*converted["qwen3-vl"])
    assert result["mrope"] == {"section": [2, 3, 3, 0], "interleaved": True}
    assert result["ropes"][0]["ggml"]["mode"] == 40 and result["ropes"][0]["rope_type"] == "imrope"
    (finding,) = result["findings"]
    assert finding["evidence"]["pairs"] == [6] and finding["layers"] == [0, 1]


def test_other_sections_are_an_mrope_sections_finding(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["qwen2-vl"]
    sections = {"qwen2vl.rope.dimension_sections": [3, 3, 2, 0]}
    (finding,) = check(rewrite(file, tmp_path / "x.gguf", values=sections), config)["findings"]
    # Pair 2 turns by the temporal id in the file, the height in the model; pair 5 by the
    # height against the width.
    assert finding["kind"] == "mrope_sections" and finding["evidence"]["pairs"] == [2, 5]
    assert finding["evidence"]["file_ids"] == ["temporal", "height"]


def test_an_m_rope_model_converted_without_sections_is_an_mrope_dropped_finding(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["qwen2-vl"]
    body = rewrite(file, tmp_path / "x.gguf", rename=("qwen2vl", "qwen2"))
    assert kinds(check(body, config)) == ["mrope_dropped"]


def test_a_model_relabelled_as_another_family_is_a_rope_type_finding(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    # Qwen3's unpermuted weights under Command R's NORM rope: pairs (2i, 2i+1), not rotate_half.
    file, config = converted["qwen3"]
    body = rewrite(file, tmp_path / "x.gguf", rename=("qwen3", "command-r"))
    assert kinds(check(body, config)) == ["rope_type"]
    # A Llama-family conversion permutes Q/K: NORM there is rotate_half, no finding.
    assert check(rewrite(file, tmp_path / "y.gguf", rename=("qwen3", "llama")), config)["conforms"]


def test_gemma3s_sliding_layers_are_read_as_llama_cpp_applies_them(
    converted: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    file, _ = converted["gemma3"]
    result = check(file, converted["gemma3"][1])
    full = [r for r in result["ropes"] if r["params"]["scaling"] == "linear"]
    local = [r for r in result["ropes"] if r["params"]["scaling"] == "none"]
    assert full[0]["layers"] == [5] and local[0]["params"]["base"] == 10000.0


def rewrite(
    file: Path,
    out: Path,
    drop_keys: tuple[str, ...] = (),
    values: dict[str, Any] | None = None,
    drop_tensors: tuple[str, ...] = (),
    tensors: dict[str, np.ndarray[Any, Any]] | None = None,
    rename: tuple[str, str] | None = None,
) -> bytes:
    """``file`` written again with the gguf package, keys and tensors dropped or changed (or
    every ``{arch}.`` key under another architecture's name)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    source = GGUFReader(file)
    arch = str(source.fields["general.architecture"].contents())
    old, new = rename or (arch, arch)
    writer = GGUFWriter(out, arch=new)
    for key, field in source.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop_keys:
            continue
        kind = field.types[0]
        value = (values or {}).get(key, field.contents())
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        named = new + key[len(old) :] if key.startswith(old + ".") else key
        writer.add_key_value(named, value, kind, sub_type=sub)
    for key, value in (values or {}).items():
        if key not in source.fields:  # a key the converter did not write, typed as it types
            kind = GGUFValueType.UINT32 if isinstance(value, int) else GGUFValueType.FLOAT32
            writer.add_key_value(key, value, kind)
    for tensor in source.tensors:
        if tensor.name in drop_tensors:
            continue
        data = (tensors or {}).get(tensor.name, np.array(tensor.data))
        writer.add_tensor(tensor.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out.read_bytes()


def kinds(result: dict[str, Any]) -> list[str]:
    return [finding["kind"] for finding in result["findings"]]


def test_a_faithful_rewrite_still_conforms(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["llama3.1"]
    assert check(rewrite(file, tmp_path / "same.gguf"), config)["conforms"] is True


def test_a_dropped_factor_tensor_is_named(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["llama3.1"]
    body = rewrite(file, tmp_path / "x.gguf", drop_tensors=("rope_freqs.weight",))
    result = check(body, config)
    assert kinds(result) == ["factor_tensor_missing"] and result["findings"][0]["layers"] == [0, 1]


def test_a_wrong_factor_tensor_is_named(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["llama3.1"]
    wrong = {"rope_freqs.weight": np.full(8, 8.0, np.float32)}
    assert kinds(check(rewrite(file, tmp_path / "x.gguf", tensors=wrong), config)) == [
        "factor_tensor_wrong"
    ]


def test_another_base_is_named(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["qwen3"]
    body = rewrite(file, tmp_path / "x.gguf", values={"qwen3.rope.freq_base": 10000.0})
    assert kinds(check(body, config)) == ["base"]


def test_a_dropped_yarn_is_named_with_its_lost_attention_factor(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["qwen2.5-yarn"]
    dropped = ("qwen2.rope.scaling.type", "qwen2.rope.scaling.factor")
    body = rewrite(file, tmp_path / "x.gguf", drop_keys=dropped)
    assert kinds(check(body, config)) == ["scaling_dropped", "attention_factor"]


def test_yarn_changed_to_linear_is_named(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["qwen2.5-yarn"]
    body = rewrite(file, tmp_path / "x.gguf", values={"qwen2.rope.scaling.type": "linear"})
    assert "scaling_changed" in kinds(check(body, config))


def test_phi3s_attention_factor_lost_is_named(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["phi3-longrope"]
    body = rewrite(file, tmp_path / "x.gguf", drop_keys=("phi3.rope.scaling.attn_factor",))
    assert kinds(check(body, config, 4096)) == ["attention_factor"]


def test_phi3s_long_factors_chosen_by_context_are_named(
    converted: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    file, config = converted["phi3-longrope"]
    assert kinds(check(file, config, 8192)) == ["longrope_by_context"]


def test_another_sliding_window_pattern_or_local_base_is_named(
    converted: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    file, config = converted["gemma3"]
    pattern = rewrite(
        file, tmp_path / "p.gguf", values={"gemma3.attention.sliding_window_pattern": 4}
    )
    local = rewrite(file, tmp_path / "b.gguf", values={"gemma3.rope.freq_base_swa": 1e6})
    moved = check(pattern, config)
    assert set(kinds(moved)) == {"sliding_window_pattern"}
    assert sorted(il for f in moved["findings"] for il in f["layers"]) == [3, 5, 7]
    assert kinds(check(local, config)) == ["base"]
