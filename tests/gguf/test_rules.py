from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from posenc.schemes.rope.gguf import answer as gguf_answer
from posenc.schemes.rope.gguf import reader
from posenc.schemes.rope.gguf.reader import GGUFError
from tests.gguf.files import gguf


def header(arch: str, layers: Any = 4, **values: Any) -> dict[str, Any]:
    file = {
        "general.architecture": arch,
        f"{arch}.context_length": 8192,
        f"{arch}.block_count": layers,
        f"{arch}.embedding_length": 64,
        f"{arch}.attention.head_count": 4,
    }
    file.update({f"{arch}.{key.replace('__', '.')}": value for key, value in values.items()})
    return file


def answer(
    values: dict[str, Any], tensors: list[tuple[str, Any]] | None = None, n_ctx: int | None = None
) -> dict[str, Any]:
    return gguf_answer.answer(reader.read(gguf(values, tensors or [])), n_ctx)


def by_layer(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {il: rope for rope in result["ropes"] for il in rope["layers"]}


def test_every_layer_is_in_one_rope_or_nope() -> None:
    for arch in ("llama", "gemma3", "cohere2", "smollm3", "qwen2"):
        result = answer(header(arch, 12, attention__sliding_window=512))
        named = sorted([il for r in result["ropes"] for il in r["layers"]] + result["nope_layers"])
        assert named == list(range(12)), arch


def test_defaults_for_absent_keys_are_llama_cpps() -> None:
    (rope,) = answer(header("qwen2"))["ropes"]
    assert rope["params"] == {"d_model": 16, "base": 10000.0, "layout": "split", "scaling": "none"}
    assert rope["ggml"]["n_ctx_orig"] == 8192 and rope["ggml"]["mode"] == 2


def test_norm_architectures_rotate_interleaved_pairs() -> None:
    (rope,) = answer(header("llama", rope__freq_base=500000.0))["ropes"]
    assert rope["rope_type"] == "norm" and rope["params"]["layout"] == "interleaved"
    assert rope["params"]["base"] == 500000.0


def test_llama3s_factor_tensor_is_each_layers_freq_factors() -> None:
    freqs = np.linspace(1, 8, 8, dtype=np.float32)
    (rope,) = answer(header("llama"), [("rope_freqs.weight", freqs)])["ropes"]
    assert rope["params"]["freq_factors"] == freqs.tolist()
    assert rope["read_from"]["tensors"] == ["rope_freqs.weight"]


def test_a_factor_tensor_of_the_wrong_length_is_refused_as_llama_cpp_does() -> None:
    with pytest.raises(GGUFError, match="n_rot/2 = 8"):
        answer(header("llama"), [("rope_freqs.weight", np.ones(4, np.float32))])


def test_a_factor_tensor_the_architecture_does_not_create_is_refused() -> None:
    with pytest.raises(GGUFError, match="creates no such tensor"):
        answer(header("qwen2"), [("rope_freqs.weight", np.ones(8, np.float32))])


def test_phi3_picks_long_factors_by_the_padded_context_not_the_length() -> None:
    values = header("phi3", rope__scaling__original_context_length=4096)
    values["phi3.rope.scaling.attn_factor"] = 1.19
    tensors = [
        ("rope_factors_long.weight", np.full(8, 2, np.float32)),
        ("rope_factors_short.weight", np.ones(8, np.float32)),
    ]
    short = answer(values, tensors, n_ctx=4096)["ropes"][0]
    padded_to_4352 = answer(values, tensors, n_ctx=4097)["ropes"][0]
    assert short["ggml"]["freq_factors"] == "rope_factors_short.weight"
    assert padded_to_4352["ggml"]["freq_factors"] == "rope_factors_long.weight"
    # recipe=ggml chooses as llama.cpp does from the padded context it is given
    assert short["params"]["n_ctx"] == 4096 and padded_to_4352["params"]["n_ctx"] == 4352
    assert short["params"]["scaling"] == "longrope"
    assert short["params"]["long_factor"] == [2.0] * 8
    assert short["params"]["short_factor"] == [1.0] * 8
    assert short["params"]["original_max_position_embeddings"] == 4096
    assert short["params"]["attention_factor"] == pytest.approx(1.19)


def test_yarn_keeps_ggmls_attention_factor_and_the_original_context() -> None:
    values = header(
        "qwen2",
        rope__scaling__type="yarn",
        rope__scaling__factor=4.0,
        rope__scaling__original_context_length=2048,
    )
    (rope,) = answer(values)["ropes"]
    assert rope["params"] == {
        "d_model": 16,
        "base": 10000.0,
        "layout": "split",
        "scaling": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 2048,
    }
    assert rope["ggml"]["ext_factor"] == 1.0 and rope["ggml"]["freq_scale"] == 0.25


def test_mistral3s_yarn_log_multiplier_changes_the_attention_factor() -> None:
    values = header(
        "mistral3",
        rope__scaling__type="yarn",
        rope__scaling__factor=16.0,
        rope__scaling__yarn_log_multiplier=1.0,
        rope__scaling__yarn_beta_fast=16.0,
    )
    (rope,) = answer(values)["ropes"]
    assert rope["params"]["attention_factor"] == 1.0  # mscale(16, 1) / mscale(16, 1)
    assert rope["params"]["beta_fast"] == 16.0


def test_gemma3s_sliding_layers_use_their_own_base_and_no_scaling() -> None:
    values = header(
        "gemma3",
        12,
        rope__freq_base=1e6,
        rope__scaling__type="linear",
        rope__scaling__factor=8.0,
        attention__sliding_window=512,
    )
    layers = by_layer(answer(values))
    assert layers[5]["params"] == {
        "d_model": 16, "base": 1e6, "layout": "split", "scaling": "linear", "factor": 8.0
    }  # fmt: skip
    assert layers[0]["params"] == {"d_model": 16, "base": 10000.0, "layout": "split",
                                   "scaling": "none"}  # fmt: skip
    assert layers[11] == layers[5] and layers[6] == layers[0]


def test_gemma3_without_a_window_has_no_sliding_layers() -> None:
    result = answer(header("gemma3", 12, rope__freq_base=1e6))
    assert len(result["ropes"]) == 1


def test_a_pattern_of_flags_per_layer_overrides_the_default() -> None:
    values = header("gemma2", 4, rope__freq_base_swa=5000.0)
    values["gemma2.attention.sliding_window_pattern"] = [True, True, False, False]
    layers = by_layer(answer(values))
    assert layers[1]["params"]["base"] == 5000.0 and layers[2]["params"]["base"] == 10000.0


def test_cohere2s_full_layers_are_nope() -> None:
    result = answer(header("cohere2", 8, attention__sliding_window=4096))
    assert result["nope_layers"] == [3, 7]


def test_smollm3_drops_rope_every_fourth_layer() -> None:
    assert answer(header("smollm3", 8))["nope_layers"] == [3, 7]


def test_granite_without_finetuned_rope_has_none() -> None:
    values = header("granite", 3)
    values["granite.rope.scaling.finetuned"] = False
    assert answer(values)["nope_layers"] == [0, 1, 2]
    assert answer(header("granite", 3))["nope_layers"] == []


def test_olmo3s_sliding_layers_drop_yarn() -> None:
    values = header(
        "olmo2",
        4,
        attention__sliding_window=4096,
        rope__scaling__type="yarn",
        rope__scaling__factor=8.0,
    )
    layers = by_layer(answer(values))
    assert layers[0]["params"]["scaling"] == "none" and layers[3]["params"]["scaling"] == "yarn"


def test_qwen2vl_reads_its_sections_and_refuses_a_file_without() -> None:
    values = header("qwen2vl", 2)
    values["qwen2vl.rope.dimension_sections"] = [2, 3, 3, 0]
    result = answer(values)
    assert result["mrope"] == {"section": [2, 3, 3, 0], "interleaved": False}
    assert result["ropes"][0]["ggml"]["mode"] == 8
    with pytest.raises(GGUFError, match="dimension_sections"):
        answer(header("qwen2vl", 2))


def test_glm4_is_mrope_only_with_sections() -> None:
    assert answer(header("glm4"))["ropes"][0]["rope_type"] == "norm"
    values = header("glm4")
    values["glm4.rope.dimension_sections"] = [2, 3, 3, 0]
    assert answer(values)["ropes"][0]["rope_type"] == "mrope"


def test_an_architecture_without_a_row_is_refused_by_name() -> None:
    with pytest.raises(GGUFError, match="'mamba' has no row"):
        answer(header("mamba"))


def test_llama_refuses_a_rope_narrower_than_its_head() -> None:
    with pytest.raises(GGUFError, match="not the head width"):
        answer(header("llama", rope__dimension_count=8))


def test_a_key_of_the_wrong_type_is_named() -> None:
    with pytest.raises(GGUFError, match=r"qwen2\.block_count is 'four'"):
        answer(header("qwen2", layers="four"))


def test_llama4s_chunked_layers_rotate_and_every_fourth_is_nope() -> None:
    assert answer(header("llama4", 8))["nope_layers"] == [3, 7]


def test_llama4_without_chunks_leaves_its_last_layer_nope_as_llama_cpp_does() -> None:
    # llama4.cpp: "always use rope" sets the step to n_layer, and (il + 1) % n_layer == 0 at
    # the last layer.
    assert answer(header("llama4", 8, attention__sliding_window=0))["nope_layers"] == [7]


def test_a_hybrids_linear_attention_layers_have_no_rope() -> None:
    values = header("qwen3next", 8)
    assert answer(values)["nope_layers"] == [0, 1, 2, 4, 5, 6]  # every fourth is attention
    values["qwen3next.full_attention_interval"] = 2
    assert answer(values)["nope_layers"] == [0, 2, 4, 6]
    values["qwen3next.attention.recurrent_layers"] = [True, False] * 4
    assert answer(values)["nope_layers"] == [0, 2, 4, 6]
