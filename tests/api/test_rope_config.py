"""POST /v1/rope/config with the config.json of real model families, written from their
published values (Hugging Face hub configs), and configs the service cannot honour."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.conftest import Client
from tests.hub_configs import HUB_CONFIGS, llama_4_rope_scaling

# Phi-3's factor lists are 48 numbers each; these stand in for the published ones (same shape,
# same range), which matters to the parsing, not to the values.
_rng = np.random.default_rng(3)
PHI3_SHORT = np.round(1 + 0.1 * _rng.random(48), 4).tolist()
PHI3_LONG = np.round(1 + 60 * _rng.random(48), 4).tolist()

FAMILIES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama-2-7b": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "rope_scaling": None,
            "rope_theta": 10000.0,
        },
        {"d_model": 128, "base": 10000.0, "scaling": "none"},
    ),
    "llama-3.1-8b": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
        },
        {
            "d_model": 128,
            "base": 500000.0,
            "scaling": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    # transformers reads ``rope_scaling or rope_parameters``: an empty rope_scaling is no rope.
    "llama, an empty rope_scaling": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "rope_scaling": {},
            "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
        },
        {"d_model": 128, "base": 10000.0, "scaling": "linear", "factor": 2.0},
    ),
    "mistral-7b-v0.1": (
        {
            "model_type": "mistral",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 32768,
            "rope_theta": 10000.0,
        },
        {"d_model": 128, "base": 10000.0, "scaling": "none"},
    ),
    "qwen2.5-7b-yarn": (
        {
            "model_type": "qwen2",
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "max_position_embeddings": 32768,
            "rope_theta": 1000000.0,
            "rope_scaling": {
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
                "type": "yarn",
            },
        },
        {
            "d_model": 128,
            "base": 1e6,
            "scaling": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    ),
    "phi-3-mini-128k": (
        {
            "model_type": "phi3",
            "hidden_size": 3072,
            "num_attention_heads": 32,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "longrope",
                "short_factor": PHI3_SHORT,
                "long_factor": PHI3_LONG,
            },
        },
        {
            "d_model": 96,
            "base": 10000.0,
            "scaling": "longrope",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "short_factor": PHI3_SHORT,
            "long_factor": PHI3_LONG,
        },
    ),
    "pythia-160m": (
        {
            "model_type": "gpt_neox",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "max_position_embeddings": 2048,
            "rotary_pct": 0.25,
            "rotary_emb_base": 10000,
        },
        {"d_model": 16, "base": 10000.0, "scaling": "none"},
    ),
    "gemma-7b": (
        {
            "model_type": "gemma",
            "hidden_size": 3072,
            "num_attention_heads": 16,
            "head_dim": 256,
            "max_position_embeddings": 8192,
            "rope_theta": 10000.0,
        },
        {"d_model": 256, "base": 10000.0, "scaling": "none"},
    ),
    "llama-3.1-8b-transformers-5": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 131072,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        },
        {"d_model": 128, "base": 500000.0, "scaling": "llama3", "factor": 8.0},
    ),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_config_gives_the_family_rope_and_urls_that_serve_it(client: Client, family: str) -> None:
    config, expected = FAMILIES[family]
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 200, response.text
    answer = response.json()
    params = answer["params"]
    for key, value in expected.items():
        assert params[key] == value, key
    assert params["layout"] == "split" and params["recipe"] == "exact"
    assert answer["rotary_dim"] == params["d_model"]
    assert answer["urls"]["table"].startswith("/v1/rope/table?")
    assert answer["urls"]["verify"].startswith("/v1/rope/verify?")
    wanted = config["max_position_embeddings"]
    fits = 2**24 // (2 * answer["rotary_dim"])  # the default POSENC_MAX_ELEMENTS
    assert answer["seq_len"]["table"] == min(wanted, fits)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_url_the_config_gives_is_served_within_the_limits(
    client_with: Callable[..., Client], family: str
) -> None:
    # Small limits, so that every family's URLs ask for fewer rows than its context.
    client = client_with(max_elements=2**14, max_work=10**8)
    config, _ = FAMILIES[family]
    answer = client.post("/v1/rope/config", json=config).json()
    rows = answer["seq_len"]
    assert 1 <= rows["verify"] <= rows["table"] < config["max_position_embeddings"]
    assert 2 * rows["table"] * answer["rotary_dim"] <= 2**14
    for name, url in answer["urls"].items():
        served = client.get(url)
        assert served.status_code == 200, (name, served.text)
        if "table" in name:
            table = np.load(io.BytesIO(served.content))
            assert table.shape == (2, rows["table"], answer["rotary_dim"])
        else:
            report = served.json()
            assert report["params"]["seq_len"] == rows["verify"]
            assert {k: v for k, v in report["params"].items() if k in answer["params"]} == (
                answer["params"]
            )


def test_pythia_rotates_a_quarter_of_its_head(client: Client) -> None:
    answer = client.post("/v1/rope/config", json=FAMILIES["pythia-160m"][0]).json()
    assert (answer["head_dim"], answer["rotary_dim"], answer["partial_rotary_factor"]) == (
        64,
        16,
        0.25,
    )


def test_gpt_j_pairs_interleave_and_give_its_rotary_dim(client: Client) -> None:
    config = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64}
    answer = client.post("/v1/rope/config", json=config).json()
    assert answer["params"]["layout"] == "interleaved" and answer["rotary_dim"] == 64


def _hunyuan_ocr(**rope: Any) -> dict[str, Any]:
    """HunyuanOCR's config.json (flat, as the Hub publishes it) with a rope_scaling of its own."""
    return {**HUB_CONFIGS["HunyuanOCR"], "rope_scaling": rope}


def test_roformer_is_its_float64_table_of_the_head_whatever_else_the_config_says(
    client: Client,
) -> None:
    # RoFormer's table: hidden_size / num_attention_heads wide, base 10000, filled in float64;
    # its model reads no rope key, so none changes the answer.
    config = {"model_type": "roformer", "hidden_size": 768, "num_attention_heads": 12}
    stray = {"rope_theta": 5e5, "head_dim": 32, "partial_rotary_factor": 0.5}
    for body in (config, {**config, **stray}):
        answer = client.post("/v1/rope/config", json=body).json()
        assert answer["params"] == {
            "d_model": 64,
            "base": 10000.0,
            "layout": "interleaved",
            "scaling": "none",
            "recipe": "exact",
            "framework_precision": "float64",
        }
        assert "framework_precision=float64" in answer["urls"]["table_framework"]
    refused = client.post("/v1/rope/config", json={**config, "rotary_value": True})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["loc"] == ["body", "rotary_value"]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"hidden_size": 64}, "head_dim"),
        ({"head_dim": 64, "rope_scaling": {"type": "mrope"}}, "rope_scaling.type"),
        (
            {"head_dim": 64, "rope_parameters": {"rope_type": "default", "mrope_section": [8]}},
            "rope_parameters.mrope_section",
        ),
        (
            {
                "head_dim": 64,
                "rope_parameters": {
                    "full_attention": {"rope_type": "default"},
                    "sliding_attention": {"rope_type": "default"},
                },
            },
            "layer_types",
        ),
        (
            {
                "head_dim": 64,
                "layer_types": ["full_attention", "sliding_attention"],
                "rope_parameters": {"full_attention": {"rope_type": "default"}},
            },
            "rope_parameters.sliding_attention",
        ),
        (
            {"head_dim": 64, "num_hidden_layers": 3, "layer_types": ["full_attention"] * 2},
            "layer_types",
        ),
        ({"head_dim": 64, "num_hidden_layers": 3, "no_rope_layers": [1, 0]}, "no_rope_layers"),
        ({"text_config": {"head_dim": 64}}, "text_config.model_type"),
        (
            {"text_config": {"model_type": "llama", "head_dim": 63}},
            "text_config.partial_rotary_factor",
        ),
        # ERNIE-4.5-VL's default sections [22, 22, 20] split 64 frequencies, not 32.
        ({"model_type": "ernie4_5_vl_moe_text", "head_dim": 64}, "mrope_section"),
        (
            {
                "model_type": "ernie4_5_vl_moe_text",
                "head_dim": 128,
                "rope_parameters": {"rope_type": "default", "mrope_section": [20, 24, 20]},
            },
            "rope_parameters.mrope_section",
        ),
        ({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12}, "model_type"),
        ({"head_dim": 64, "num_hidden_layers": 10**6}, "num_hidden_layers"),
        (
            {"head_dim": 64, "num_hidden_layers": 4, "cross_attention_layers": [1, 9]},
            "cross_attention_layers",
        ),
        ({"head_dim": 64, "rotary_dim": 128}, "rotary_dim"),
        (
            # ModernBERT's Hub form: global_rope_theta/local_rope_theta, which its config class
            # turns into a rope per layer type.
            {
                "model_type": "modernbert",
                "hidden_size": 768,
                "num_attention_heads": 12,
                "global_rope_theta": 160000.0,
                "local_rope_theta": 10000.0,
            },
            "rope_parameters",
        ),
        ({"model_type": "cohere2", "head_dim": 64}, "num_hidden_layers"),
        (
            {"model_type": "llama", "head_dim": 64, "rope_local_base_freq": 1e4},
            "rope_local_base_freq",
        ),
        (
            {"head_dim": 64, "rotary_dim": 32, "rope_parameters": {"rope_type": "proportional"}},
            "rotary_dim",
        ),
        (
            {
                "head_dim": 64,
                "rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 0.01},
            },
            "partial_rotary_factor",
        ),
        (
            {"head_dim": 64, "rope_parameters": {"rope_type": "proportional", "beta_fast": 8}},
            "rope_parameters.beta_fast",
        ),
        (
            {"head_dim": 64, "num_hidden_layers": 2, "per_layer_config": {"01": {"head_dim": 32}}},
            "per_layer_config",
        ),
        (
            {"head_dim": 64, "num_hidden_layers": 2, "per_layer_config": {"1": {"rope_theta": 5}}},
            "per_layer_config.1.rope_theta",
        ),
        (
            {"head_dim": 64, "num_hidden_layers": 2, "per_layer_config": {"2": {}}},
            "per_layer_config.2",
        ),
        (
            {
                "head_dim": 64,
                "layer_types": ["full_attention"] * 2,
                "rope_parameters": {"full_attention": {"rope_type": "default"}},
                "per_layer_config": {"1": {"head_dim": 32}},
            },
            "per_layer_config",
        ),
        ({"head_dim": 64, "rope_theta": "big"}, "rope_theta"),
        ({"head_dim": 64, "rope_theta": 0.5}, "rope_theta"),
        ({"head_dim": 63}, "partial_rotary_factor"),
        ({"head_dim": 64, "partial_rotary_factor": 1.5}, "partial_rotary_factor"),
        ({"head_dim": 64, "rope_scaling": {"type": "linear"}}, "rope_scaling.factor"),
        (
            {"head_dim": 64, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
            "max_position_embeddings",
        ),
        (
            {
                "head_dim": 64,
                "max_position_embeddings": 8,
                "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]},
            },
            "rope_scaling.short_factor",
        ),
        ({"head_dim": 64, "rope_scaling": [1, 2]}, "rope_scaling"),
        # A rope per layer type, all null (schema-valid: found by contract fuzzing).
        ({"head_dim": 64, "rope_parameters": {"x": None}}, "rope_parameters.x"),
        # HunYuan's stretch of the base is its families' alone; Llama's config class ignores it.
        (
            {"head_dim": 64, "rope_scaling": {"type": "dynamic", "factor": 1.0, "alpha": 8.0}},
            "rope_scaling.alpha",
        ),
        # HunYuan-VL's defaults (head_dim null) are a model its own code cannot build.
        ({"model_type": "hunyuan_vl"}, "head_dim"),
        ({"model_type": "hunyuan_vl_text", "hidden_size": 1024}, "head_dim"),
        (_hunyuan_ocr(type="xdrope", alpha=1000.0, factor=1.0), "rope_scaling.mrope_section"),
        (
            _hunyuan_ocr(type="xdrope", alpha=1000.0, factor=1.0, xdrope_section=[16, 16, 16, 8]),
            "rope_scaling.xdrope_section",
        ),
        (
            _hunyuan_ocr(
                type="xdrope",
                alpha=1000.0,
                factor=1.0,
                xdrope_section=[16, 16, 16, 16],
                mrope_section=[32, 16, 8, 8],
            ),
            "rope_scaling.xdrope_section",
        ),
        # Required of rope_type dynamic by transformers' validation, though alpha reads none.
        (_hunyuan_ocr(type="xdrope", alpha=1000.0, xdrope_section=[16] * 4), "rope_scaling.factor"),
    ],
)
def test_a_config_the_service_cannot_honour_is_a_422_naming_the_field(
    client: Client, config: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", field]


def test_body_must_be_a_json_object_and_small(client: Client) -> None:
    assert client.post("/v1/rope/config", json=[1]).status_code == 422
    assert client.post("/v1/rope/config", content=b"{nope").status_code == 422
    big = b'{"pad": "' + b"x" * 2**20 + b'"}'
    response = client.post("/v1/rope/config", content=big)
    assert response.status_code == 413


def test_config_links_what_the_work_limit_admits_and_leaves_out_what_it_never_would(
    client_with: Callable[..., Client],
) -> None:
    # Work, not values, binds here: tables of a few hundred rows, and no verify at all (its
    # fixed cost alone is over the limit), so no URL in the answer is one the service refuses.
    client = client_with(max_work=4_000_000)
    config, _ = FAMILIES["llama-3.1-8b"]
    answer = client.post("/v1/rope/config", json=config).json()
    rows = answer["seq_len"]
    assert 1 <= rows["table"] < 2**24 // (2 * answer["rotary_dim"])
    assert rows["verify"] == 0
    assert set(answer["urls"]) == {
        "table",
        "table_framework",
        "table_ggml",
        "table_mlx",
        "alias_table",
        "alias_table_framework",
    }
    for name, url in answer["urls"].items():
        served = client.get(url)
        assert served.status_code == 200, (name, served.text)
    longer = answer["urls"]["table"].replace(
        f"seq_len={rows['table']}", f"seq_len={rows['table'] + 1}"
    )
    assert client.get(longer).status_code == 422  # the largest servable, not merely a servable one


GEMMA3_TEXT = {
    "model_type": "gemma3_text",
    "head_dim": 256,
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "num_hidden_layers": 8,
    "max_position_embeddings": 131072,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 2,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}


def test_a_rope_per_layer_type_names_every_layer_once(client: Client) -> None:
    answer = client.post("/v1/rope/config", json=GEMMA3_TEXT).json()
    ropes = {tuple(r["layer_types"]): r for r in answer["ropes"]}
    full, sliding = ropes[("full_attention",)], ropes[("sliding_attention",)]
    assert full["layers"] == [5] and sliding["layers"] == [0, 1, 2, 3, 4, 6, 7]
    assert full["params"]["scaling"] == "linear" and full["params"]["factor"] == 8.0
    assert full["params"]["base"] == 1e6 and sliding["params"]["base"] == 1e4
    assert sliding["params"]["scaling"] == "none" and answer["nope_layers"] == []
    assert "params" not in answer  # two ropes: none is "the" rope of the model
    for rope in answer["ropes"]:
        assert client.get(rope["urls"]["table_framework"]).status_code == 200


def test_a_multimodal_config_is_read_from_its_text_config(client: Client) -> None:
    llama4 = {
        "model_type": "llama4",
        "vision_config": {"hidden_size": 1408, "num_attention_heads": 16},
        "text_config": {
            "model_type": "llama4_text",
            "hidden_size": 5120,
            "num_attention_heads": 40,
            "head_dim": 128,
            "num_hidden_layers": 8,
            "max_position_embeddings": 262144,
            "rope_theta": 500000.0,
            "rope_scaling": llama_4_rope_scaling(),
        },
    }
    answer = client.post("/v1/rope/config", json=llama4).json()
    assert answer["text_config"] == "text_config" and answer["model_type"] == "llama4_text"
    # Llama 4: no rope in every fourth layer unless no_rope_layers says otherwise.
    assert answer["nope_layers"] == [3, 7]
    (rope,) = answer["ropes"]
    assert rope["layers"] == [0, 1, 2, 4, 5, 6] and rope["params"]["scaling"] == "llama3"
    flags = {**llama4["text_config"], "no_rope_layers": [1, 0, 1, 1, 1, 1, 1, 1]}  # type: ignore[dict-item]
    answer = client.post("/v1/rope/config", json={**llama4, "text_config": flags}).json()
    assert answer["nope_layers"] == [1]


def test_families_that_pair_neighbours_are_answered_interleaved(client: Client) -> None:
    # Cohere's rotary module lays its cache out in pairs; GLM's and ERNIE's keep rotate_half's
    # cache and repeat its first half pairwise as they apply it.
    for model_type, layout, apply in (
        ("cohere", "interleaved", None),
        ("glm4", "split", "interleaved"),
        ("ernie4_5", "split", "interleaved"),
        ("llama", "split", None),
    ):
        config = {"model_type": model_type, "head_dim": 128, "hidden_size": 4096}
        (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
        assert (rope["params"]["layout"], rope["apply"]) == (layout, apply), model_type


def test_llama_4_query_scaling_is_stated_beside_the_rope(client: Client) -> None:
    ministral = {
        "model_type": "ministral3",
        "head_dim": 128,
        "hidden_size": 5120,
        "num_hidden_layers": 2,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 16384,
            "max_position_embeddings": 262144,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale_all_dim": 1.0,
            "mscale": 1.0,
            "llama_4_scaling_beta": 0.1,
        },
    }
    (rope,) = client.post("/v1/rope/config", json=ministral).json()["ropes"]
    assert rope["query_scaling"] == {
        "llama_4_scaling_beta": 0.1,
        "original_max_position_embeddings": 16384.0,
    }
    assert rope["params"]["scaling"] == "yarn"


def test_deepseek_v3_ropes_its_rope_part_with_interleaved_q_k(client: Client) -> None:
    # The Hub's config has no rope_interleave: DeepSeek-V3's config class defaults it to true.
    (rope,) = client.post("/v1/rope/config", json=HUB_CONFIGS["deepseek_v3"]).json()["ropes"]
    assert rope["rotary_dim"] == 64 and rope["params"]["layout"] == "split"
    assert rope["apply"] == "interleaved_to_rotate_half"
    assert rope["params"]["scaling"] == "yarn" and rope["params"]["factor"] == 40.0
    plain = {**HUB_CONFIGS["deepseek_v3"], "rope_interleave": False}
    (rope,) = client.post("/v1/rope/config", json=plain).json()["ropes"]
    assert rope["apply"] is None


def test_gemma_3_1b_as_the_hub_writes_it(client: Client) -> None:
    answer = client.post("/v1/rope/config", json=HUB_CONFIGS["gemma3_text 1B"]).json()
    ropes = {tuple(r["layer_types"]): r for r in answer["ropes"]}
    full, local = ropes[("full_attention",)], ropes[("sliding_attention",)]
    assert full["layers"] == [5, 11, 17, 23] and len(local["layers"]) == 22
    assert (full["params"]["base"], full["params"]["scaling"]) == (1e6, "none")
    assert (local["params"]["base"], local["params"]["scaling"]) == (1e4, "none")


def test_cohere2_turns_only_its_sliding_window_layers(client: Client) -> None:
    config = {
        "model_type": "cohere2",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 8,
        "rope_theta": 50000.0,
        "sliding_window_pattern": 4,
    }
    answer = client.post("/v1/rope/config", json=config).json()
    assert answer["nope_layers"] == [3, 7]
    (rope,) = answer["ropes"]
    assert rope["layers"] == [0, 1, 2, 4, 5, 6] and rope["params"]["layout"] == "interleaved"


def test_jetmoe_heads_are_kv_channels_wide(client: Client) -> None:
    answer = client.post("/v1/rope/config", json=HUB_CONFIGS["jetmoe"]).json()
    assert answer["head_dim"] == 128 and answer["rotary_dim"] == 128  # not 2048 / 32 = 64


def test_zamba2_without_its_memory_rope_has_none(client: Client) -> None:
    config = {"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32}
    answer = client.post("/v1/rope/config", json={**config, "num_hidden_layers": 4}).json()
    assert answer["ropes"] == [] and answer["nope_layers"] == [0, 1, 2, 3]
    refused = client.post("/v1/rope/config", json={**config, "use_mem_rope": True})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["loc"] == ["body", "use_mem_rope"]


def test_a_key_the_config_leaves_out_takes_its_config_class_default(client: Client) -> None:
    # GLM-4's config class turns half of each 128-wide head; Cohere's base is 500000.
    glm = {"model_type": "glm4", "hidden_size": 4096, "num_attention_heads": 32}
    (rope,) = client.post("/v1/rope/config", json=glm).json()["ropes"]
    assert rope["rotary_dim"] == 64 and rope["partial_rotary_factor"] == 0.5
    cohere = {"model_type": "cohere", "hidden_size": 4096, "num_attention_heads": 32}
    (rope,) = client.post("/v1/rope/config", json=cohere).json()["ropes"]
    assert rope["params"]["base"] == 500000.0


def test_rope_scaling_wins_over_rope_parameters_as_in_transformers(client: Client) -> None:
    config = {
        "model_type": "llama",
        "head_dim": 64,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
    assert rope["params"]["scaling"] == "linear" and rope["params"]["factor"] == 8.0


def test_every_answer_is_what_the_openapi_document_says(client: Client) -> None:
    import jsonschema

    document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/rope/config"]["post"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    validator = jsonschema.Draft202012Validator(schema)
    configs = [
        *(config for config, _ in FAMILIES.values()),
        *HUB_CONFIGS.values(),
        GEMMA3_TEXT,
        {"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32, "n_layer": 2},
    ]
    for config in configs:
        response = client.post("/v1/rope/config", json=config)
        assert response.status_code == 200, response.text
        errors = [error.message for error in validator.iter_errors(response.json())]
        assert not errors, (config.get("model_type"), errors)
    # The schema is exact: an answer with a key it does not name, or without one, is invalid.
    answer = response.json()
    assert not validator.is_valid({**answer, "unnamed": 1})
    assert not validator.is_valid({k: v for k, v in answer.items() if k != "nope_layers"})


def _gemma4(text: dict[str, Any]) -> dict[str, Any]:
    """Gemma 4's layout (transformers 5.23's default): 12 layers, every sixth full attention
    with heads 512 wide, a quarter of which turn by its proportional rope."""
    layer_types = ["sliding_attention"] * 5 + ["full_attention"]
    return {
        "model_type": "gemma4",
        "text_config": {
            "model_type": "gemma4_text",
            "hidden_size": 2304,
            "num_attention_heads": 8,
            "head_dim": 256,
            "num_hidden_layers": 12,
            "max_position_embeddings": 131072,
            "layer_types": layer_types * 2,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1000000.0,
                },
            },
            **text,
        },
    }


@pytest.mark.parametrize(
    "heads",
    [
        {"per_layer_config": {"05": {"head_dim": 512}, "11": {"head_dim": 512}}},  # as saved
        {"global_head_dim": 512},  # what the config class turns into per_layer_config
        {},  # its default, 512
    ],
)
def test_gemma_4_turns_a_quarter_of_its_wider_full_attention_heads(
    client: Client, heads: dict[str, Any]
) -> None:
    answer = client.post("/v1/rope/config", json=_gemma4(heads)).json()
    ropes = {tuple(r["layer_types"]): r for r in answer["ropes"]}
    full, sliding = ropes[("full_attention",)], ropes[("sliding_attention",)]
    assert full["layers"] == [5, 11] and answer["head_dim"] == 256
    assert (sliding["params"]["d_model"], sliding["rotary_dim"]) == (256, 256)
    assert "rotary_pairs" not in sliding["params"]
    # The cache spans the 512-wide head; 64 pairs turn at 10^6^(−2i/512), the others hold still.
    assert (full["params"]["d_model"], full["params"]["rotary_pairs"]) == (512, 64)
    assert (full["rotary_dim"], full["partial_rotary_factor"]) == (128, 0.25)
    assert "rotary_pairs=64" in full["urls"]["table"]
    for name in ("table", "table_framework"):
        table = np.load(io.BytesIO(client.get(full["urls"][name]).content))
        assert table.shape == (2, full["seq_len"]["table"], 512)
        still = np.concatenate([np.arange(256) >= 64] * 2)
        assert (table[0][:, still] == 1).all() and (table[1][:, still] == 0).all()
        assert (table[1][1:, ~still] != 0).all()
    report = client.get(full["urls"]["verify"]).json()
    assert all(check["holds"] for check in report["checks"]), report


def test_gemma_4_heads_of_one_layer_type_must_agree(client: Client) -> None:
    heads = {"per_layer_config": {"05": {"head_dim": 512}, "11": {"head_dim": 256 + 128}}}
    response = client.post("/v1/rope/config", json=_gemma4(heads))
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "text_config.per_layer_config"]


def test_gemma_4_and_lfm_3_default_ropes_turn_the_whole_head(client: Client) -> None:
    # Their rotary modules' own default rope reads no partial_rotary_factor.
    config = _gemma4({"global_head_dim": 512})
    config["text_config"]["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = 0.5
    ropes = client.post("/v1/rope/config", json=config).json()["ropes"]
    assert {r["rotary_dim"] for r in ropes} == {256, 128}
    lfm3 = {
        "model_type": "lfm3",
        "head_dim": 128,
        "layer_types": ["conv", "full_attention", "conv", "sliding_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "rope_theta": 1000000.0,
                "partial_rotary_factor": 0.5,
            },
        },
    }
    answer = client.post("/v1/rope/config", json=lfm3).json()
    ropes = {tuple(r["layer_types"]): r for r in answer["ropes"]}
    assert answer["nope_layers"] == [0, 2]
    full, sliding = ropes[("full_attention",)], ropes[("sliding_attention",)]
    assert (full["params"]["d_model"], full["params"]["rotary_pairs"], full["rotary_dim"]) == (
        128,
        32,
        64,
    )
    assert (sliding["params"]["d_model"], sliding["rotary_dim"]) == (128, 128)


def test_a_proportional_factor_divides_its_frequencies(client: Client) -> None:
    config = {
        "head_dim": 64,
        "rope_parameters": {
            "rope_type": "proportional",
            "rope_theta": 1e6,
            "partial_rotary_factor": 0.5,
            "factor": 8.0,
        },
    }
    (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
    params = rope["params"]
    assert (params["scaling"], params["factor"], params["rotary_pairs"]) == ("linear", 8.0, 16)
    whole = {**config, "rope_parameters": {"rope_type": "proportional"}}
    (rope,) = client.post("/v1/rope/config", json=whole).json()["ropes"]
    assert "rotary_pairs" not in rope["params"] and rope["rotary_dim"] == 64  # every pair turns


# HunYuan's 128-wide heads under alpha 1000: the whole head, at rope_theta·alpha^(d/(d−2)).
_STRETCHED_BY_ALPHA = {
    "d_model": 128,
    "base": 10000.0 * 1000.0 ** (128 / 126),
    "layout": "split",
    "scaling": "none",
    "recipe": "exact",
}


def test_hunyuan_ocr_turns_the_whole_head_by_a_base_stretched_by_alpha(client: Client) -> None:
    """The flat Hub config, its text model alone and transformers 5's nested form are one rope:
    the text tokens' (their ids equal on all four axes), of base rope_theta·alpha^(d/(d−2)), as
    transformers computes it in float64 before its rotary module rounds it to float32."""
    text = {k: v for k, v in HUB_CONFIGS["HunyuanOCR"].items() if k != "model_type"}
    nested = {
        "model_type": "hunyuan_vl",
        "text_config": {
            **{k: v for k, v in text.items() if k not in ("rope_scaling", "rope_theta")},
            "model_type": "hunyuan_vl_text",
            "rope_parameters": {
                "rope_type": "dynamic",
                "rope_theta": 10000.0,
                "alpha": 1000.0,
                "factor": 1.0,
                "mrope_section": [16, 16, 16, 16],
            },
        },
    }
    configs = [HUB_CONFIGS["HunyuanOCR"], HUB_CONFIGS["HunyuanOCR text model"], nested]
    answers = [client.post("/v1/rope/config", json=config).json() for config in configs]
    for answer in answers:
        (rope,) = answer["ropes"]
        assert answer["model_type"] == "hunyuan_vl_text" and answer["mrope"] is None
        assert rope["layers"] == list(range(24)) and rope["apply"] is None
        assert rope["params"] == _STRETCHED_BY_ALPHA
    assert [answer["text_config"] for answer in answers] == [None, None, "text_config"]
    # Without alpha (or with rope_type default) the base is rope_theta's.
    default = {**configs[0], "rope_scaling": {"type": "default", "xdrope_section": [16] * 4}}
    (rope,) = client.post("/v1/rope/config", json=default).json()["ropes"]
    assert rope["params"]["base"] == 10000.0 and rope["params"]["scaling"] == "none"


def test_hunyuan_7b_s_dynamic_rope_with_an_alpha_is_a_fixed_base(client: Client) -> None:
    """Hunyuan-7B's checkpoints say "dynamic" with an alpha: transformers' module reads it as
    ntk_alpha, one base rope_theta·alpha^(d/(d−2)) whatever the length (the MoE's too); without
    the head_dim that module reads, refused naming it, as the model fails."""
    config = HUB_CONFIGS["Hunyuan-7B"]
    for body in (config, {**config, "model_type": "hunyuan_v1_moe"}):
        answer = client.post("/v1/rope/config", json=body).json()
        assert answer["params"] == _STRETCHED_BY_ALPHA
    headless = {k: v for k, v in config.items() if k != "head_dim"}
    refused = client.post("/v1/rope/config", json=headless)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("head_dim:")


def test_llama_4_scout_s_empty_no_rope_layers_leave_every_fourth_layer_without_a_rope(
    client: Client,
) -> None:
    # Llama4TextConfig: `self.no_rope_layers if self.no_rope_layers else` the interval's.
    answer = client.post("/v1/rope/config", json=HUB_CONFIGS["Llama-4-Scout"]).json()
    assert answer["nope_layers"] == list(range(3, 48, 4))
    (rope,) = answer["ropes"]
    assert len(rope["layers"]) == 36 and rope["params"]["scaling"] == "llama3"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        # SmolLM3's config class keeps an empty list, which its layers then index.
        (
            {"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4, "no_rope_layers": []},
            "no_rope_layers",
        ),
        # list(None), and a pattern of None, fail in their config classes.
        (
            {
                "model_type": "recurrent_gemma",
                "head_dim": 64,
                "hidden_size": 256,
                "num_attention_heads": 4,
                "num_hidden_layers": 3,
                "block_types": None,
            },
            "block_types",
        ),
        (
            {"model_type": "nemotron_h", "head_dim": 64, "hybrid_override_pattern": None},
            "hybrid_override_pattern",
        ),
        # Its config class takes layer_idx + 1 modulo a null interval.
        (
            {**HUB_CONFIGS["Llama-4-Scout"]["text_config"], "no_rope_layer_interval": None},
            "no_rope_layer_interval",
        ),
    ],
)
def test_an_empty_or_null_list_is_refused_where_its_config_class_cannot_run_it(
    client: Client, config: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/rope/config", json=config)
    assert response.status_code == 422 and field in response.json()["detail"]


def test_mllama_s_cross_attention_layers_are_its_config_class_s_where_none_are_given(
    client: Client,
) -> None:
    text: dict[str, Any] = {
        "model_type": "mllama_text_model",
        "hidden_size": 4096,
        "num_attention_heads": 32,
    }
    nulled: dict[str, Any] = {"cross_attention_layers": None}
    for layers, given in ((40, {}), (20, nulled)):
        config = {**text, "num_hidden_layers": layers, **given}
        answer = client.post("/v1/rope/config", json=config).json()
        assert answer["nope_layers"] == [i for i in (3, 8, 13, 18, 23, 28, 33, 38) if i < layers]
    given = {**text, "num_hidden_layers": 8, "cross_attention_layers": list[int]()}
    assert client.post("/v1/rope/config", json=given).json()["nope_layers"] == []


def test_deepseek_v4_s_rope_sits_in_the_trailing_dimensions_of_each_head(client: Client) -> None:
    # Its sliding layers (compress_ratios 0) turn the main rope, the compressed ones the
    # compress rope (compress_rope_theta, YaRN with no attention factor), both over the last
    # qk_rope_head_dim = 64 dimensions of its 512-wide heads, in pairs (2i, 2i+1).
    answer = client.post("/v1/rope/config", json=HUB_CONFIGS["DeepSeek-V4-Flash"]).json()
    assert answer["num_hidden_layers"] == 43 and answer["nope_layers"] == []
    main, compress = sorted(answer["ropes"], key=lambda rope: rope["params"]["base"])
    assert main["layers"] == [0, 1] and main["layer_types"] == ["sliding_attention"]
    assert len(compress["layers"]) == 41 and compress["params"]["scaling"] == "yarn"
    assert compress["params"]["base"] == 160000.0 and compress["params"]["attention_factor"] == 1
    for rope in (main, compress):
        assert (rope["rotary_dim"], rope["rotary_offset"]) == (64, 448)
        assert rope["params"]["layout"] == "interleaved"


def test_a_rope_over_the_leading_dimensions_is_at_offset_zero(client: Client) -> None:
    config = {"model_type": "glm4", "head_dim": 128, "partial_rotary_factor": 0.5}
    (rope,) = client.post("/v1/rope/config", json=config).json()["ropes"]
    assert (rope["rotary_dim"], rope["rotary_offset"]) == (64, 0)


def test_config_links_the_runtimes_tables_where_each_runtime_implements_the_rope(
    client: Client,
) -> None:
    """Llama 3.1's rope is llama.cpp's and MLX's too; a dynamic one is MLX's only (llama.cpp
    implements no dynamic scaling), and each linked table is served."""
    config, _ = FAMILIES["llama-3.1-8b"]
    answer = client.post("/v1/rope/config", json=config).json()
    for runtime in ("ggml", "mlx"):
        url = answer["urls"][f"table_{runtime}"]
        assert f"recipe={runtime}" in url
        assert client.get(re.sub(r"seq_len=\d+", "seq_len=4", url)).status_code == 200
    dynamic = {**config, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    dynamic.pop("rope_parameters", None)
    urls = client.post("/v1/rope/config", json=dynamic).json()["urls"]
    assert "table_mlx" in urls and "table_ggml" not in urls
