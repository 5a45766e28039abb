"""POST /v1/rope/config for families whose config keeps its sizes, its text model (or, without
one, the model its rope turns) or its rope's switch under keys of its own (Dia,
Nemotron3-Diarization, Moonshine, MiniMax-M3-VL, Wav2Vec2-Conformer, SeamlessM4T), its count of
layers (HRM) or its base where transformers does not read it (DBRX), whose layer types may have
no rope (Beam, Cohere-Compass), and for the text models of M-RoPE families read alone (GLM-4V,
Cosmos-3-Edge): configs as the Hub publishes them, and the default configs their own models
cannot run."""

from __future__ import annotations

from typing import Any

import pytest

from posenc.schemes.rope.models import config as rope_config
from tests.conftest import Client
from tests.hub_configs import HUB_CONFIGS

# DBRX as the Hub publishes it (databricks/dbrx-instruct), without its attn_config.rope_theta.
DBRX: dict[str, Any] = {
    "model_type": "dbrx",
    "d_model": 6144,
    "n_heads": 48,
    "n_layers": 40,
    "max_seq_len": 32768,
    "attn_config": {"clip_qkv": 8, "kv_n_heads": 8},
}
MOONSHINE_TINY: dict[str, Any] = {
    "model_type": "moonshine",
    "hidden_size": 288,
    "encoder_num_attention_heads": 8,
    "decoder_num_attention_heads": 8,
    "encoder_num_hidden_layers": 6,
    "decoder_num_hidden_layers": 6,
    "max_position_embeddings": 194,
    "partial_rotary_factor": 0.9,
    "rope_theta": 10000.0,
}
# GLM-4.1V-9B's text model: half of each 128-wide head turns, in sections of 8, 12 and 12.
GLM4V_TEXT: dict[str, Any] = {
    "model_type": "glm4v_text",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 40,
    "partial_rotary_factor": 0.5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000, "mrope_section": [8, 12, 12]},
}


def _refused_at(client: Client, config: dict[str, Any]) -> list[str]:
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 422, response.text
    return [str(part) for part in response.json()["errors"][0]["loc"]]


def test_dbrx_is_refused_with_or_without_the_base_transformers_does_not_read(
    client: Client,
) -> None:
    # The checkpoint says 500000, and its attention needs the key; transformers 5 turns by
    # rope_parameters' 10000. Without the key, DBRX cannot be built at all.
    hub = {**DBRX, "attn_config": {**DBRX["attn_config"], "rope_theta": 500000}}
    for config in (hub, DBRX):
        assert _refused_at(client, config) == ["body", "model_type"]


def test_hrm_turns_one_rope_in_every_layer_of_its_stacks(client: Client) -> None:
    # As transformers saves it: num_hidden_layers counts the cache slots of its cycles
    # (16 · H_cycles 2 · (L_cycles 3 + 1)); each of its two stacks has 16 layers, whose
    # attention turns the whole 128-wide head by the model's one rope, in every cycle.
    saved = {
        "model_type": "hrm_text",
        "hidden_size": 1536,
        "num_attention_heads": 12,
        "num_hidden_layers": 128,
        "num_layers_per_stack": 16,
        "H_cycles": 2,
        "L_cycles": 3,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    # As written before its config class splits it: num_hidden_layers is a stack's.
    written = {**saved, "num_hidden_layers": 16, "num_layers_per_stack": None}
    for config in (saved, written):
        answer = client.post("/v1/rope/config", json=config).json()
        (rope,) = answer["ropes"]
        assert answer["head_dim"] == 128 and rope["rotary_dim"] == 128
        assert rope["layers"] == list(range(16)) and answer["nope_layers"] == []


def test_dia_is_read_from_its_decoder_config(client: Client) -> None:
    decoder = {
        "model_type": "dia_decoder",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "head_dim": 128,
        "num_hidden_layers": 18,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    encoder = {"model_type": "dia_encoder", "hidden_size": 1024, "num_attention_heads": 16}
    config = {"model_type": "dia", "encoder_config": encoder, "decoder_config": decoder}
    answer = client.post("/v1/rope/config", json=config).json()
    assert answer["text_config"] == "decoder_config" and answer["head_dim"] == 128
    assert answer["ropes"][0]["layers"] == list(range(18))


def test_nemotron3_diarization_is_read_from_its_audio_encoder(client: Client) -> None:
    # No text model: the one rope turns the frames of its audio encoder, the sub-config its
    # model passes its rotary module (before issue 34 was closed, refused naming model_type).
    audio = {
        "model_type": "nemotron3_diarization_audio",
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_hidden_layers": 31,
        "max_position_embeddings": 5000,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    head = {"hidden_size": 192, "num_speakers": 8, "audio_hidden_size": 512}
    config = {"model_type": "nemotron3_diarization", "audio_config": audio, "head_config": head}
    answer = client.post("/v1/rope/config", json=config).json()
    assert answer["text_config"] == "audio_config" and answer["head_dim"] == 64
    (rope,) = answer["ropes"]
    assert rope["layers"] == list(range(31)) and rope["params"]["d_model"] == 64
    refused = client.post("/v1/rope/config", json={"model_type": "nemotron3_diarization"})
    assert refused.status_code == 422 and refused.json()["errors"][0]["loc"][-1] == "audio_config"


def test_blt_is_refused_naming_the_stacks_each_answered_alone(client: Client) -> None:
    # Four stacks, each numbering its layers from 0: one answer's layers cannot hold them.
    encoder = {
        "model_type": "blt_local_encoder",
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_hidden_layers": 1,
        "max_position_embeddings": 24576,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    }
    response = client.post("/v1/rope/config", json={"model_type": "blt", "encoder_config": encoder})
    assert response.status_code == 422
    detail = response.json()["detail"]
    stacks = ("encoder_config", "global_config", "decoder_config", "patcher_config")
    assert all(key in detail for key in stacks)
    (rope,) = client.post("/v1/rope/config", json=encoder).json()["ropes"]
    assert rope["layers"] == [0] and rope["params"]["d_model"] == 64
    assert rope["params"]["base"] == 500000.0


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Ministral, head_dim given", "head_dim"),
        ("Hunyuan-7B", "head_dim"),
        ("HunYuan-MoE, head_dim given", "head_dim"),
        ("LFM2-MoE, layer_types given", "layer_types"),
    ],
)
def test_a_key_the_model_reads_as_given_is_required(client: Client, name: str, key: str) -> None:
    # Their config classes default it to null, on which their own models fail: answered with
    # it, refused naming it without it (absent or null), never a fallback the model lacks.
    config = HUB_CONFIGS[name]
    assert client.post("/v1/rope/config", json=config).status_code == 200
    for without in ({k: v for k, v in config.items() if k != key}, {**config, key: None}):
        response = client.post("/v1/rope/config", json=without)
        assert response.status_code == 422
        assert response.json()["errors"][0]["loc"][-1] == key


def test_moonshine_turns_ninety_percent_of_its_decoder_heads_in_pairs(client: Client) -> None:
    answer = client.post("/v1/rope/config", json=MOONSHINE_TINY).json()
    (rope,) = answer["ropes"]
    # int(288 / 8 · 0.9) = 32 of each 36-wide head; the apply call repeats the cache pairwise.
    assert answer["head_dim"] == 36 and rope["rotary_dim"] == 32
    assert rope["apply"] == "interleaved" and rope["layers"] == list(range(6))


def test_minimax_m3_vl_turns_its_whole_head_whatever_rotary_dim_says(client: Client) -> None:
    config = {
        "model_type": "minimax_m3_vl_text",
        "hidden_size": 6144,
        "num_attention_heads": 64,
        "head_dim": 128,
        "rotary_dim": 64,
        "num_hidden_layers": 2,
    }
    (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
    assert rope["rotary_dim"] == 128 and rope["params"]["base"] == 5000000.0


def test_wav2vec2_conformer_has_a_rope_only_when_its_position_embeddings_are(
    client: Client,
) -> None:
    config = {
        "model_type": "wav2vec2-conformer",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_hidden_layers": 3,
    }
    for relative in ({}, {"position_embeddings_type": "relative"}):
        answer = client.post("/v1/rope/config", json={**config, **relative}).json()
        assert answer["ropes"] == [] and answer["nope_layers"] == [0, 1, 2]
    rotary = {**config, "position_embeddings_type": "rotary"}
    assert _refused_at(client, rotary) == ["body", "position_embeddings_type"]


def test_seamless_m4t_has_no_rope_unless_its_speech_encoder_turns_one(client: Client) -> None:
    # Its text decoder's positions are sinusoidal; only its speech encoder turns a rope, with
    # position_embeddings_type="rotary" (relative by default). Its layers are its decoder's.
    config = {
        "model_type": "seamless_m4t",
        "hidden_size": 1024,
        "decoder_layers": 3,
        "decoder_attention_heads": 16,
        "speech_encoder_attention_heads": 16,
    }
    for relative in ({}, {"position_embeddings_type": "relative"}):
        answer = client.post("/v1/rope/config", json={**config, **relative}).json()
        assert answer["ropes"] == [] and answer["nope_layers"] == [0, 1, 2]
    rotary = {**config, "position_embeddings_type": "rotary"}
    assert _refused_at(client, rotary) == ["body", "position_embeddings_type"]


def test_glm4v_text_model_alone_turns_half_its_head_in_pairs(client: Client) -> None:
    answer = client.post("/v1/rope/config", json=GLM4V_TEXT).json()
    (rope,) = answer["ropes"]
    assert rope["rotary_dim"] == 64 and rope["params"]["layout"] == "interleaved"
    assert answer["mrope"] is None  # a text model alone: its ids are one row


def test_sections_over_more_frequencies_than_they_cover_are_refused(client: Client) -> None:
    # transformers' default GLM-4V text config turns the whole head: [8, 12, 12] covers 32 of
    # its 64 frequencies, and its own rotary module fails to split them.
    whole = {k: v for k, v in GLM4V_TEXT.items() if k != "partial_rotary_factor"}
    assert _refused_at(client, whole) == ["body", "rope_parameters.mrope_section"]
    default = {**whole, "rope_parameters": {"rope_type": "default", "rope_theta": 10000}}
    assert _refused_at(client, default) == ["body", "mrope_section"]
    nested = {"model_type": "glmga", "text_config": default}
    assert _refused_at(client, nested) == ["body", "text_config.mrope_section"]


def test_cosmos3_edge_text_model_reads_past_its_interleaved_sections(client: Client) -> None:
    config = {
        "model_type": "cosmos3_edge_text",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 100000000.0,
            "mrope_section": [24, 20, 20],
        },
    }
    (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
    assert rope["rotary_dim"] == 128 and rope["params"]["base"] == 100000000.0


def test_a_layer_type_whose_rope_is_null_has_none(client: Client) -> None:
    layer_types = ["sliding_attention"] * 3 + ["full_attention"]
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    beam = {
        "model_type": "beam",
        "hidden_size": 5120,
        "num_attention_heads": 48,
        "head_dim": 128,
        "layer_types": layer_types * 2,
        "rope_parameters": {"sliding_attention": rope, "full_attention": None},
    }
    model = rope_config.read(beam)
    assert model.nope_layers == (3, 7)
    (only,) = model.ropes
    assert only.layer_types == ("sliding_attention",) and only.layers == (0, 1, 2, 4, 5, 6)
    # The published body schema admits the null too (issue 34: it was refused over HTTP).
    response = client.post("/v1/rope/config", json=beam)
    assert response.status_code == 200
    answer = response.json()
    assert answer["nope_layers"] == [3, 7] and answer["ropes"][0]["layers"] == [0, 1, 2, 4, 5, 6]


@pytest.mark.parametrize("name", ["Beam", "Cohere-Compass", "Cohere-Compass text model"])
def test_hub_configs_with_a_null_rope_per_layer_type_are_answered_for_every_layer(
    client: Client, name: str
) -> None:
    config = HUB_CONFIGS[name]
    text = config.get("text_config", config)
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 200, response.json()
    answer = response.json()
    full = [i for i, kind in enumerate(text["layer_types"]) if kind == "full_attention"]
    assert answer["nope_layers"] == full
    (rope,) = answer["ropes"]
    assert sorted(rope["layers"] + full) == list(range(text["num_hidden_layers"]))


def test_cohere_compass_reads_a_rope_per_layer_type_or_none(client: Client) -> None:
    sliding = {"rope_type": "default", "rope_theta": 50000.0, "mrope_section": [24, 20, 20]}
    text = {
        "model_type": "cohere_compass_text",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
        "rope_parameters": {"sliding_attention": sliding, "full_attention": None},
    }
    answer = client.post(
        "/v1/rope/config", json={"model_type": "cohere_compass", "text_config": text}
    )
    assert answer.json()["nope_layers"] == [3]
    # transformers' default config gives no rope per layer type, and its model cannot run it.
    flat = {**text, "rope_parameters": {}}
    assert _refused_at(client, flat) == ["body", "rope_parameters"]


def test_longcat_flash_layers_are_its_attention_sublayers(client: Client) -> None:
    # Each of its num_layers decoder layers holds two multi-latent attentions, layers 2i and
    # 2i + 1, both turning the 64-wide rope part of q/k from pairs (2i, 2i+1).
    config = {
        "model_type": "longcat_flash",
        "hidden_size": 6144,
        "num_attention_heads": 64,
        "num_layers": 3,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_theta": 10000000.0,
    }
    answer = client.post("/v1/rope/config", json=config).json()
    assert answer["num_hidden_layers"] == 6
    (rope,) = answer["ropes"]
    assert rope["layers"] == list(range(6)) and rope["rotary_dim"] == 64
    assert rope["apply"] == "interleaved_to_rotate_half"


@pytest.mark.parametrize(
    "heads",
    [{"per_layer_config": {"05": {"head_dim": 512, "num_key_value_heads": 1}}}, {}],
    ids=["as saved", "by its config class's default"],
)
def test_embedding_gemma2_full_attention_heads_are_twice_as_wide(
    client: Client, heads: dict[str, Any]
) -> None:
    config = {
        "model_type": "embedding_gemma2_text",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "head_dim": 256,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        **heads,
    }
    ropes = client.post("/v1/rope/config", json=config).json()["ropes"]
    found = {rope["layer_types"][0]: (rope["rotary_dim"], rope["layers"]) for rope in ropes}
    assert found == {"sliding_attention": (256, [0, 1, 2, 3, 4]), "full_attention": (512, [5])}


def test_nanochat_turns_the_cache_pairs_the_other_way(client: Client) -> None:
    config = {
        "model_type": "nanochat",
        "hidden_size": 1280,
        "num_attention_heads": 10,
        "num_hidden_layers": 20,
        "max_position_embeddings": 2048,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
    assert rope["apply"] == "reversed" and rope["params"]["layout"] == "split"
    assert rope["rotary_dim"] == 128
