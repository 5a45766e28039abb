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


@pytest.mark.parametrize("kept", [2**32 - 3, 10**6, 4096])
def test_layers_kept_past_those_run_are_bounded_as_those_run_are(kept: int) -> None:
    """block_count counts the multi-token-prediction layers too: a file claiming 2^32 of them
    beside two that run is refused before a list of them is made (it was a 500)."""
    claim = header("glm4moe", kept + 2, nextn_predict_layers=kept)
    with pytest.raises(GGUFError, match=f"block_count is {kept + 2}, of which 2 run: 1 to 4096"):
        answer(claim)


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


def test_every_row_answers_a_minimal_file_of_its_architecture() -> None:
    from posenc.schemes.rope.gguf.arches import ARCHES

    needs: dict[str, dict[str, Any]] = {
        "qwen2vl": {"rope__dimension_sections": [2, 3, 3, 0]},
        "qwen3vl": {"rope__dimension_sections": [2, 3, 3, 0]},
        "qwen3vlmoe": {"rope__dimension_sections": [2, 3, 3, 0]},
        "qwen35": {"rope__dimension_sections": [2, 3, 3, 0]},
        "qwen35moe": {"rope__dimension_sections": [2, 3, 3, 0]},
        "qwen4exp": {"rope__dimension_sections": [2, 3, 3, 0]},
        "qwen3tts": {"rope__dimension_sections": [2, 3, 3, 0]},
        "paddleocr": {"rope__dimension_sections": [2, 3, 3, 0]},
        "dots3note": {"rope__freq_base_swa": 5e4},
        "deepseek4": {"attention__compress_rope_freq_base": 16e4},
    }
    arrays = {
        "gemma4": "attention.sliding_window_pattern",
        "gemma4-assistant": "attention.sliding_window_pattern",
        "maple": "attention.sliding_window_pattern",
        "mimo2": "attention.sliding_window_pattern",
        "spark2_5": "attention.sliding_window_pattern",
        "step35": "attention.sliding_window_pattern",
        "granite_swa": "attention.sliding_window_pattern",
        "dots3note": "attention.sliding_window_pattern",
        "deepseek4": "attention.compress_ratios",
    }
    for name in ARCHES:
        values = header(name, 4, **needs.get(name, {}))
        if name in arrays:
            values[f"{name}.{arrays[name]}"] = [1, 0, 1, 0]
        if name == "gemma4-assistant":
            values[f"{name}.nextn_predict_layers"] = 4
        result = answer(values)
        named = sorted(il for r in result["ropes"] for il in r["layers"] if r["applies_to"][0]
                       in ("q", "q_pe"))  # fmt: skip
        assert sorted(named + result["nope_layers"]) == list(range(4)), name


def test_gemma4s_full_layers_take_the_factor_tensor_and_sliding_ones_the_local_base() -> None:
    values = header("gemma4", 2, rope__freq_base=1e6, rope__freq_base_swa=1e4,
                    attention__key_length=32, rope__dimension_count=32,
                    rope__dimension_count_swa=16)  # fmt: skip
    values["gemma4.attention.sliding_window_pattern"] = [True, False]
    freqs = np.array([1.0] * 4 + [1e30] * 12, np.float32)
    layers = by_layer(answer(values, [("rope_freqs.weight", freqs)]))
    assert layers[0]["params"] == {"d_model": 16, "base": 1e4, "layout": "split",
                                   "scaling": "none"}  # fmt: skip
    assert layers[1]["params"] == {"d_model": 32, "base": 1e6, "layout": "split",
                                   "scaling": "none", "rotary_pairs": 4}  # fmt: skip


def test_layers_sharing_an_earlier_layers_kv_turn_q_alone() -> None:
    values = header("gemma4", 4, attention__shared_kv_layers=2)
    values["gemma4.attention.sliding_window_pattern"] = [True] * 4
    own, shared = answer(values)["ropes"]
    assert (own["layers"], own["applies_to"]) == ([0, 1], ["q", "k"])
    assert (shared["layers"], shared["applies_to"]) == ([2, 3], ["q"])
    assert own["ggml"] == shared["ggml"]
    gemma3n = answer(header("gemma3n", 25))
    q_only = [r for r in gemma3n["ropes"] if r["applies_to"] == ["q"]]
    assert sorted(il for r in q_only for il in r["layers"]) == list(range(20, 25))


def test_deepseek_v3_2s_indexer_is_a_second_rope_in_the_same_layers() -> None:
    values = header("deepseek32", 2, rope__dimension_count=8)
    mla, indexer = answer(values)["ropes"]
    assert mla["layers"] == indexer["layers"] == [0, 1]
    assert (mla["applies_to"], mla["ggml"]["mode"]) == (["q_pe", "k_pe"], 0)
    assert (indexer["applies_to"], indexer["ggml"]["mode"]) == (["indexer_q", "indexer_k"], 2)


def test_glm_5s_indexers_follow_its_types_or_glm_5_2s_constant() -> None:
    values = header("glm-dsa", 8, rope__dimension_count=8)
    values["glm-dsa.context_length"] = 1048576  # GLM-5.2: its default types
    indexer = [r for r in answer(values)["ropes"] if r["applies_to"][0] == "indexer_q"]
    assert indexer[0]["layers"] == [0, 1, 2, 6]
    values["glm-dsa.attention.indexer.types"] = [1, 0] * 4
    indexer = [r for r in answer(values)["ropes"] if r["applies_to"][0] == "indexer_q"]
    assert indexer[0]["layers"] == [0, 2, 4, 6]


def test_a_multi_token_prediction_layer_is_named_and_never_a_decoder_layer() -> None:
    values = header("glm4moe", 3, nextn_predict_layers=1)
    result = answer(values)
    assert result["num_hidden_layers"] == 2 and result["mtp_layers"] == [2]
    assert "draft context" in result["notes"][0]
    kept = answer(header("dots3note", 3, nextn_predict_layers=1, rope__freq_base_swa=5e4,
                         attention__sliding_window_pattern=[0, 0, 0]))  # fmt: skip
    assert kept["mtp_layers"] == [2] and "never runs" in kept["notes"][0]


def test_deepseek_v4_states_its_attention_rope_and_names_what_it_does_not() -> None:
    values = header("deepseek4", 4, attention__compress_rope_freq_base=16e4,
                    attention__compress_ratios=[0, 4, 128, 4],
                    rope__scaling__type="yarn", rope__scaling__factor=16.0)  # fmt: skip
    layers = by_layer(answer(values))
    assert layers[0]["ggml"]["freq_base"] == 10000.0 and layers[0]["ggml"]["ext_factor"] == 0
    assert layers[1]["ggml"]["freq_base"] == 160000.0 and layers[1]["ggml"]["ext_factor"] == 1
    (unstated,) = answer(values)["unstated"]
    assert unstated["layers"] == [1, 2, 3] and "ggml_rope_ext_back" in unstated["reason"]


def test_a_rope_type_without_a_rope_call_is_every_layer_nope_with_the_reason() -> None:
    result = answer(header("bert", 3))
    assert result["ropes"] == [] and result["nope_layers"] == [0, 1, 2]
    assert "position_embd" in result["notes"][0]


def test_recurrent_layers_by_their_kv_heads_have_no_rope() -> None:
    values = header("lfm2", 4)
    values["lfm2.attention.head_count_kv"] = [0, 0, 2, 0]
    assert answer(values)["nope_layers"] == [0, 1, 3]


def test_granite_swas_rope_pattern_makes_nope_layers() -> None:
    values = header("granite_swa", 4)
    values["granite_swa.attention.sliding_window_pattern"] = [1, 1, 1, 0]
    values["granite_swa.attention.rope_pattern"] = [1, 1, 1, 0]
    assert answer(values)["nope_layers"] == [3]


def test_hunyuans_alpha_raises_the_base_as_llama_cpp_does_in_float32() -> None:
    values = header("hunyuan-dense", 2, rope__scaling__alpha=1000.0, attention__key_length=128)
    (rope,) = answer(values)["ropes"]
    base = np.float32(10000) * np.float32(np.float32(1000.0) ** np.float32(128 / 126))
    assert rope["ggml"]["freq_base"] == pytest.approx(float(base), rel=1e-6)


@pytest.mark.parametrize(
    ("keys", "refusal"),
    [
        ({"rope__scaling__alpha": 1000.0, "attention__key_length": 2}, "a head of 2 takes no"),
        ({"rope__scaling__alpha": 1e30, "attention__key_length": 4}, "comes to inf"),
        ({"rope__freq_base": 0.5}, "comes to 0.5"),
    ],
)
def test_a_base_that_is_not_one_a_rope_can_have_is_refused(
    keys: dict[str, Any], refusal: str
) -> None:
    """A base past float32 or at most 1 (it was sent as null, beside a 200)."""
    with pytest.raises(GGUFError, match=refusal):
        answer(header("hunyuan-dense", 2, **keys))


def test_step_3_5s_full_layers_rotate_half_the_dimensions_with_the_factor_tensor() -> None:
    values = header("step35", 2, attention__key_length=16)
    values["step35.attention.sliding_window_pattern"] = [True, False]
    factors = np.ones(8, np.float32)
    layers = by_layer(answer(values, [("rope_freqs.weight", factors)]))
    assert layers[0]["ggml"]["n_dims"] == 16 and layers[0]["ggml"]["freq_factors"] is None
    assert layers[1]["ggml"]["n_dims"] == 8 and layers[1]["ggml"]["freq_factors"] is not None


def test_smallthinkers_dense_first_full_layers_are_nope_only_with_a_window() -> None:
    assert answer(header("smallthinker", 8))["nope_layers"] == []
    windowed = answer(header("smallthinker", 8, attention__sliding_window=4096))
    assert windowed["nope_layers"] == [0, 4]


def test_cogvlm_and_deepseek_ocr_take_their_graphs_fixed_arguments() -> None:
    (rope,) = answer(header("cogvlm", 2, rope__freq_base=5e5))["ropes"]
    assert (rope["ggml"]["freq_base"], rope["ggml"]["n_ctx_orig"]) == (10000.0, 0)
    (ocr,) = answer(header("deepseek2-ocr", 2, rope__dimension_count=8))["ropes"]
    assert (ocr["ggml"]["mode"], ocr["ggml"]["n_dims"]) == (2, 16)  # NEOX over n_embd/n_head


def test_dflash_is_m_rope_with_any_section_and_deepseek_v4_with_hyper_connections() -> None:
    values = header("dflash", 2)
    values["dflash.rope.dimension_sections"] = [8, 0, 0, 0]
    assert answer(values)["ropes"][0]["rope_type"] == "mrope"
    values = header("dflash", 2, hyper_connection__count=4)
    assert answer(values)["ropes"][0]["rope_type"] == "norm"


def test_nanbeiges_loops_run_its_layers_again() -> None:
    result = answer(header("nanbeige", 2, num_loops=3))
    assert result["num_hidden_layers"] == 6 and result["ropes"][0]["layers"] == list(range(6))


def _projector(head: int) -> dict[str, Any]:
    return {
        "general.architecture": "clip",
        "clip.projector_type": "qwen2vl_merger",
        "clip.vision.block_count": 2,
        "clip.vision.embedding_length": 4 * head,
        "clip.vision.attention.head_count": 4,
    }


def test_a_vision_projectors_two_axes_each_turn_half_its_head() -> None:
    (rope,) = answer(_projector(64))["ropes"]
    assert (rope["rope_type"], rope["params"]["d_model"], rope["ggml"]["sections"]) == (
        "vision", 32, [16, 16, 16, 16]
    )  # fmt: skip


@pytest.mark.parametrize("head", [2, 6, 4 * 65537])
def test_a_vision_head_no_rope_served_can_turn_is_refused(head: int) -> None:
    """Each axis turns half the head, a rope of d_model ≤ 65536 as every rope served: a wider
    head was answered with params no GET takes."""
    with pytest.raises(GGUFError, match=f"the vision head is {head} wide"):
        answer(_projector(head))
