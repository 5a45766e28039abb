"""The architectures added with issue 41, held to the files llama.cpp's converter writes for
tiny random transformers models (:mod:`tests.gguf.tiny_models`): what each answer says layer
by layer — the rope each layer gets and what it turns, the layers without one, the layers past
the trunk — where the verdict alone would not show it; the models whose verdict the service
cannot check, held to what llama.cpp's source says; and every converted file's rope
parameters, through ``recipe=ggml``, give back the call the service reads from the file (a
round trip within posenc: that the call is llama.cpp's own is held by tests/gguf/cross_check.py
against llama.cpp itself, run beside the suite, and by tests/gguf/test_llama_cpp_records.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.schemes.rope.gguf import answer, reader
from posenc.schemes.rope.models import answer as config_answer
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml
from tests.gguf.converted import ALL, Converted, check

pytestmark = pytest.mark.llama_cpp


def answered(converted: Converted, name: str, n_ctx: int | None = None) -> dict[str, Any]:
    file, _ = converted[name]
    return answer.answer(reader.read(file.read_bytes()), n_ctx)


def by_layer(result: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    layers: dict[int, list[dict[str, Any]]] = {}
    for rope in result["ropes"]:
        for il in rope["layers"]:
            layers.setdefault(il, []).append(rope)
    return layers


@pytest.mark.parametrize("name", ALL)
def test_each_ropes_params_give_back_the_ggml_call(converted: Converted, name: str) -> None:
    file, _ = converted[name]
    header = reader.read(file.read_bytes())
    for rope in answer.answer(header, None)["ropes"]:
        given: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in rope["params"].items()
        }
        if "rotary_pairs" in given:  # frozen pairs (factor 1e30): recipe=ggml takes none
            frozen = header.rope_tensors[rope["ggml"]["freq_factors"]][given["rotary_pairs"] :]
            assert all(factor > 1e29 for factor in frozen), name
            continue
        derived = ggml.derive(RopeParams(**{**given, "recipe": "ggml"}))
        call = rope["ggml"]
        assert (derived.n_dims, derived.freq_base, derived.freq_scale) == (
            call["n_dims"], call["freq_base"], call["freq_scale"]
        ), name  # fmt: skip
        assert (derived.ext_factor, derived.attn_factor) == (
            call["ext_factor"], call["attn_factor"]
        ), name  # fmt: skip
        named = call["freq_factors"]
        if named is not None:
            factors = header.rope_tensors[named][: call["n_dims"] // 2]
            assert derived.freq_factors == tuple(map(float, factors)), name


def test_glm_4_5s_partial_rotary_and_its_multi_token_prediction_layer(
    converted: Converted,
) -> None:
    result = answered(converted, "glm-4.5")
    (rope,) = result["ropes"]
    assert rope["layers"] == [0, 1] and rope["ggml"]["n_dims"] == 8  # half of the 16-wide head
    assert result["num_hidden_layers"] == 2 and result["mtp_layers"] == [2]
    assert any("layer 2 (nextn_predict_layers) is a" in note for note in result["notes"])
    assert "draft context" in result["notes"][0]


def test_deepseek_v3_2s_two_ropes_in_each_layer_name_what_they_turn(
    converted: Converted,
) -> None:
    result = answered(converted, "deepseek-v3.2")
    mla, indexer = result["ropes"]
    assert mla["layers"] == indexer["layers"] == [0, 1]
    assert mla["applies_to"] == ["q_pe", "k_pe"] and mla["rope_type"] == "norm"
    assert indexer["applies_to"] == ["indexer_q", "indexer_k"] and indexer["rope_type"] == "neox"
    assert mla["ggml"]["n_dims"] == indexer["ggml"]["n_dims"] == 16  # qk_rope_head_dim


def test_gemma_4s_proportional_full_layer_and_local_base_sliding_layer(
    converted: Converted,
) -> None:
    layers = by_layer(answered(converted, "gemma4"))
    (sliding,), (full,) = layers[0], layers[1]
    assert sliding["params"]["base"] == 10000.0 and sliding["ggml"]["freq_factors"] is None
    assert full["ggml"]["n_dims"] == 32 and full["ggml"]["freq_factors"] == "rope_freqs.weight"
    # the rotated quarter turns (factor 1), the rest is frozen (factor 1e30): rotary_pairs
    assert full["params"]["rotary_pairs"] == 4 and "freq_factors" not in full["params"]


def test_gemma_3ns_pattern_of_five_is_four_local_layers_and_a_full_one(
    converted: Converted,
) -> None:
    layers = by_layer(answered(converted, "gemma3n"))
    assert [layers[il][0]["params"]["base"] for il in range(5)] == [1e4] * 4 + [1e6]


@pytest.mark.parametrize("name", ["lfm2", "lfm2-moe", "bamba"])
def test_hybrids_rotate_only_their_attention_layers(converted: Converted, name: str) -> None:
    result = answered(converted, name)
    assert result["nope_layers"] == [0] and [r["layers"] for r in result["ropes"]] == [[1]]


def test_lagunas_sliding_layer_is_plain_rope_over_its_own_width(converted: Converted) -> None:
    layers = by_layer(answered(converted, "laguna"))
    (full,), (sliding,) = layers[0], layers[1]
    assert (full["ggml"]["n_dims"], full["ggml"]["freq_base"]) == (8, 500000.0)
    assert (sliding["ggml"]["n_dims"], sliding["ggml"]["freq_base"]) == (16, 10000.0)
    assert sliding["ggml"]["beta_fast"] == 0.0 and sliding["ggml"]["n_ctx_orig"] > 0


def test_afmoes_full_layer_is_nope(converted: Converted) -> None:
    assert answered(converted, "afmoe")["nope_layers"] == [3]


@pytest.mark.parametrize("name", ["bert", "starcoder"])
def test_a_rope_type_without_a_rope_call_answers_every_layer_nope(
    converted: Converted, name: str
) -> None:
    result = answered(converted, name)
    assert result["ropes"] == [] and result["nope_layers"] == [0, 1]
    assert "calls no rope" in result["notes"][0] or "turns no rope" in result["notes"][0]


def test_hrms_cache_slots_all_turn_the_models_one_rope(converted: Converted) -> None:
    _, config = converted["hrm-text"]
    result = answered(converted, "hrm-text")
    (rope,) = result["ropes"]
    assert rope["layers"] == list(range(16)) == list(range(result["num_hidden_layers"]))
    model = config_answer.describe(config, config_answer.servable_rows(SERVICE_DEFAULTS))
    (mine,) = model["ropes"]
    assert {k: rope["params"][k] for k in ("d_model", "base", "layout", "scaling")} == {
        k: mine["params"][k] for k in ("d_model", "base", "layout", "scaling")
    }


def test_qwen4_exps_attention_layer_turns_by_interleaved_sections(converted: Converted) -> None:
    result = answered(converted, "qwen4-exp")
    (rope,) = result["ropes"]
    assert result["nope_layers"] == [0, 1, 2] and rope["layers"] == [3]  # linear attention
    assert rope["rope_type"] == "imrope" and rope["ggml"]["sections"] == [1, 1, 0, 0]
    assert rope["ggml"]["n_dims"] == 4  # partial_rotary_factor 0.25 of 16


def test_phi_3_5_moes_factors_and_attention_factor_are_the_converters(
    converted: Converted,
) -> None:
    short = answered(converted, "phimoe", 4096)["ropes"][0]
    long = answered(converted, "phimoe", 8192)["ropes"][0]
    assert short["ggml"]["freq_factors"] == "rope_factors_short.weight"
    assert long["ggml"]["freq_factors"] == "rope_factors_long.weight"
    # phi.py's sqrt(1 + ln(scale)/ln(original)), not PhiMoE's own mscales
    expected = math.sqrt(1 + math.log(131072 / 4096) / math.log(4096))
    assert short["ggml"]["attn_factor"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("name", ["bert", "starcoder", "qwen4-exp", "phimoe"])
def test_the_verdict_is_not_checked_where_the_config_reader_refuses_the_model(
    converted: Converted, name: str
) -> None:
    from posenc.errors import ParameterError

    file, config = converted[name]
    with pytest.raises(ParameterError):
        check(file, config)


def test_indexer_ropes_are_reported_not_compared(converted: Converted) -> None:
    file, config = converted["glm-5"]
    result = check(file, config)
    assert result["conforms"] is True
    indexer = [r for r in result["ropes"] if r["applies_to"][0] == "indexer_q"]
    assert indexer and all(r["max_abs_difference"] is None for r in indexer)
    others = [r for r in result["ropes"] if r not in indexer]
    assert others and all(r["max_abs_difference"] is not None for r in others)


@pytest.mark.parametrize("name", ["qwen2-vl", "qwen3-vl"])
def test_a_vision_projectors_layers_turn_patches_by_llama_cpps_vision_mode(
    converted: Converted, name: str
) -> None:
    from posenc.schemes.rope.vision import config as vision_config

    file, config = converted[f"{name}.mmproj"]
    result = answer.answer(reader.read(file.read_bytes()), None)
    assert result["architecture"] == "clip" and result["num_hidden_layers"] == 3
    (rope,) = result["ropes"]
    model = vision_config.read(config)
    head = model.head_dim
    assert result["head_dim"] == head and model.family.kind == "qwen"
    # ggml_rope_multi in VISION mode: d/2 wide, four sections of d/4, the model's theta
    assert rope["ggml"]["mode"] == 24 and rope["ggml"]["n_dims"] == head // 2
    assert rope["ggml"]["sections"] == [head // 4] * 4
    assert rope["params"] == {"d_model": head // 2, "base": model.theta, "scaling": "none",
                              "layout": "split"}  # fmt: skip
    with pytest.raises(Exception, match="vision projector"):
        check(file, config)
