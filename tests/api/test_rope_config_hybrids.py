"""POST /v1/rope/config for hybrids of attention and Mamba or recurrent layers whose config names
the layers' kinds in keys of its own: Bamba's attention layers by index (attn_layer_indices),
Granite 4.0-H's layer_types (or layers_block_type) with a rope only where
position_embedding_type says so, RecurrentGemma's block_types repeated over the layers,
NemotronH's letters (no rope at all); and speech models' text transformers (Moshi, Kyutai; CLVP's
decoder, which has none, and its text encoder, refused). Measured against the models themselves
in tests/reference/test_hybrid_ropes.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Client
from tests.hub_configs import HUB_CONFIGS

BAMBA = HUB_CONFIGS["Bamba-9B"]
GRANITE_H = HUB_CONFIGS["Granite-4.0-H-350M"]
RECURRENT_GEMMA = HUB_CONFIGS["RecurrentGemma-2B"]
# Granite 4.0-H's layers with a rope: its attention layers turn q/k as Llama's do.
GRANITE_ROPE: dict[str, Any] = {
    "model_type": "granitemoehybrid",
    "hidden_size": 1536,
    "num_attention_heads": 12,
    "num_hidden_layers": 4,
    "layer_types": ["mamba", "attention", "mamba", "attention"],
    "position_embedding_type": "rope",
    "rope_theta": 10000000,
}

MOSHI: dict[str, Any] = {
    "model_type": "moshi",
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_hidden_layers": 3,
    "max_position_embeddings": 3000,
    "rope_theta": 10000.0,
}
NEMOTRON_H: dict[str, Any] = {
    "model_type": "nemotron_h",
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "mamba_num_heads": 32,
    "mamba_head_dim": 64,
    "n_groups": 2,
    "hybrid_override_pattern": "M*M-",
}


def _answer(client: Client, config: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _refused_at(client: Client, config: dict[str, Any]) -> str:
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 422, response.text
    return str(response.json()["errors"][0]["loc"][1])


def test_bamba_turns_half_of_each_head_in_the_attention_layers_it_lists(client: Client) -> None:
    answer = _answer(client, BAMBA)
    (rope,) = answer["ropes"]
    assert rope["layers"] == [9, 18, 27] and rope["layer_types"] == ["full_attention"]
    assert rope["rotary_dim"] == 64 and rope["partial_rotary_factor"] == 0.5
    assert answer["nope_layers"] == [i for i in range(32) if i not in (9, 18, 27)]


def test_bamba_without_attention_layers_turns_nothing(client: Client) -> None:
    config = {k: v for k, v in BAMBA.items() if k != "attn_layer_indices"}
    answer = _answer(client, config)
    assert answer["ropes"] == [] and answer["nope_layers"] == list(range(32))


def test_bamba_reads_its_partial_rotary_factor_only_in_its_rope_dict(client: Client) -> None:
    # Its config class sets the top-level key to 0.5, whatever the config says ...
    (rope,) = _answer(client, {**BAMBA, "partial_rotary_factor": 0.25})["ropes"]
    assert rope["rotary_dim"] == 64
    # ... and keeps the rope dict's own.
    own = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}
    (rope,) = _answer(client, {**BAMBA, "rope_parameters": own})["ropes"]
    assert rope["rotary_dim"] == 32


@pytest.mark.parametrize("key", ["layer_types", "layers_block_type"])
def test_bamba_layer_types_it_derives_cannot_be_given(client: Client, key: str) -> None:
    config = {**BAMBA, key: ["full_attention"] * 32}
    assert _refused_at(client, config) == key


def test_granite_4_h_attention_layers_have_no_rope_by_default(client: Client) -> None:
    answer = _answer(client, GRANITE_H)
    assert answer["ropes"] == [] and answer["nope_layers"] == list(range(32))


def test_granite_4_h_attention_layers_turn_the_whole_head_when_told_to(
    client: Client,
) -> None:
    # Its default rope reads no partial_rotary_factor.
    answer = _answer(client, {**GRANITE_ROPE, "partial_rotary_factor": 0.5})
    (rope,) = answer["ropes"]
    assert rope["layers"] == [1, 3] and rope["rotary_dim"] == 128
    assert rope["params"]["base"] == 10000000.0 and answer["nope_layers"] == [0, 2]


def test_granite_4_h_layers_block_type_wins_over_layer_types(client: Client) -> None:
    config = {**GRANITE_ROPE, "layer_types": ["attention"] * 4}
    config["layers_block_type"] = ["attention", "mamba", "mamba", "mamba"]
    (rope,) = _answer(client, config)["ropes"]
    assert rope["layers"] == [0]


def test_granite_4_h_refuses_what_its_model_cannot_run(client: Client) -> None:
    # A scaled rope reads partial_rotary_factor; the attention turns the whole head by its
    # cache, which is then narrower than the head.
    linear = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    config = {**GRANITE_ROPE, "partial_rotary_factor": 0.5, "rope_parameters": linear}
    assert _refused_at(client, config) == "partial_rotary_factor"
    whole = {**GRANITE_ROPE, "rope_parameters": linear}
    assert _answer(client, whole)["ropes"][0]["rotary_dim"] == 128
    # Its masks are keyed by full and linear attention alone.
    sliding = {**GRANITE_ROPE, "layer_types": ["mamba", "sliding_attention"] * 2}
    assert _refused_at(client, sliding) == "layer_types"


def test_recurrent_gemma_turns_half_of_each_head_in_every_third_layer(client: Client) -> None:
    answer = _answer(client, RECURRENT_GEMMA)
    (rope,) = answer["ropes"]
    assert rope["layers"] == list(range(2, 26, 3)) and rope["rotary_dim"] == 128
    assert rope["layer_types"] == ["sliding_attention"]
    assert len(answer["nope_layers"]) == 26 - 8


def test_recurrent_gemma_refuses_what_its_config_class_or_rotary_module_does(
    client: Client,
) -> None:
    linear = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    config = {**RECURRENT_GEMMA, "rope_parameters": linear}
    assert _refused_at(client, config) == "rope_parameters.rope_type"
    assert _refused_at(client, {**RECURRENT_GEMMA, "layer_types": ["sliding_attention"] * 26}) == (
        "layer_types"
    )
    # Its config class repeats the block kinds 100 times, then cuts.
    deep = {**RECURRENT_GEMMA, "block_types": ["attention"], "num_hidden_layers": 101}
    assert _refused_at(client, deep) == "block_types"


def test_moshi_turns_the_whole_head_of_its_temporal_transformer(client: Client) -> None:
    # Its default rope reads no partial_rotary_factor; its depth decoder has no rope.
    answer = _answer(client, {**MOSHI, "partial_rotary_factor": 0.5})
    (rope,) = answer["ropes"]
    assert rope["layers"] == [0, 1, 2] and rope["rotary_dim"] == 128
    linear = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    half = {**MOSHI, "rope_parameters": {**linear, "partial_rotary_factor": 0.5}}
    assert _refused_at(client, half) == "partial_rotary_factor"


def test_nemotron_h_layers_are_its_pattern_s_letters_and_none_has_a_rope(
    client: Client,
) -> None:
    answer = _answer(client, {**NEMOTRON_H, "num_hidden_layers": 52})
    assert answer["num_hidden_layers"] == 4
    assert answer["ropes"] == [] and answer["nope_layers"] == [0, 1, 2, 3]
    # Inside a speech model, as its text model.
    nested = _answer(client, {"model_type": "nemo_speechlm", "text_config": NEMOTRON_H})
    assert nested["text_config"] == "text_config" and nested["nope_layers"] == [0, 1, 2, 3]
    assert _refused_at(client, {**NEMOTRON_H, "hybrid_override_pattern": "M*X"}) == (
        "hybrid_override_pattern"
    )


def test_clvp_s_decoder_has_no_rope_and_its_text_encoder_is_refused(client: Client) -> None:
    decoder = {"model_type": "clvp_decoder", "hidden_size": 1024, "num_attention_heads": 16}
    answer = _answer(client, {**decoder, "num_hidden_layers": 30})
    assert answer["ropes"] == [] and answer["nope_layers"] == list(range(30))
    encoder = {"model_type": "clvp_encoder", "hidden_size": 768, "num_attention_heads": 12}
    assert _refused_at(client, {"model_type": "clvp", "text_config": encoder}) == (
        "text_config.model_type"
    )
