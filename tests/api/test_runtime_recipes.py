"""recipe=ggml and recipe=mlx over HTTP: refusals name the recipe, and a cache a runtime built
(ggml-python with llama.cpp's arguments, mlx[cpu] with mlx-lm's rope) is diagnosed as that
runtime's recipe rather than as imprecise float32 angles."""

from __future__ import annotations

import io
from typing import Any

import mpmath
import numpy as np
import pytest

from posenc.schemes.rope.maths import encode
from posenc.schemes.rope.params import Recipe, RopeParams
from tests.conftest import Client
from tests.reference import runtimes
from tests.reference.llama_cpp_args import call


def _runtime_cache(recipe: str, params: RopeParams, positions: np.ndarray) -> np.ndarray:
    """The cos/sin cache ``(2, n, d)`` the runtime itself computes (not posenc's recipe), laid
    out as ``params.layout`` lays a rope cache out."""
    if recipe == "ggml":
        pytest.importorskip("ggml", reason="ggml-python is part of the reference extra")
        cos, sin = runtimes.ggml_halves(call(params), positions)
    else:
        pytest.importorskip("mlx.core", reason="mlx[cpu] is part of the reference extra")
        cos, sin = runtimes.mlx_halves(params, positions)
    if params.layout == "interleaved":
        return np.stack([np.repeat(cos, 2, axis=1), np.repeat(sin, 2, axis=1)])
    return np.stack([np.concatenate([cos, cos], axis=1), np.concatenate([sin, sin], axis=1)])


@pytest.mark.parametrize(
    ("recipe", "query"),
    [
        ("ggml", "scaling=dynamic&factor=2&original_max_position_embeddings=64"),
        ("ggml", "rotary_pairs=2"),
        ("mlx", "rotary_pairs=2"),
        ("mlx", "layout=interleaved&scaling=longrope&original_max_position_embeddings=64"
         "&short_factor=1,1,1,1&long_factor=2,2,2,2"),
    ],
)  # fmt: skip
def test_a_scaling_the_runtime_does_not_implement_is_a_422_naming_the_recipe(
    client: Client, recipe: str, query: str
) -> None:
    response = client.get(f"/v1/rope/table?d_model=8&seq_len=4&recipe={recipe}&{query}")
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "urn:posenc:problem:not-applicable"
    assert problem["errors"][0]["loc"] == ["query", "recipe"]
    assert f"recipe={recipe}" in problem["detail"] or "mlx-lm" in problem["detail"]


def test_freq_factors_give_ggml_s_own_rope_and_the_exact_one_and_no_other_recipe(
    client: Client,
) -> None:
    served = client.get(
        "/v1/rope/table?d_model=8&seq_len=2&recipe=ggml&freq_factors=1,2,3,4&format=npy"
    )
    assert served.status_code == 200
    table = np.load(io.BytesIO(served.content))
    # ggml's own rope of that factor tensor (ggml_rope_ext's src[2]), bit for bit.
    stated = RopeParams(d_model=8, freq_factors=(1.0, 2.0, 3.0, 4.0))
    assert np.array_equal(table, _runtime_cache("ggml", stated, np.arange(2)))
    # The exact rope of the same factor tensor: sin(1 · 10000^(-i/4) / f_i), correctly rounded.
    exact = client.get("/v1/rope/table?d_model=8&seq_len=2&freq_factors=1,2,3,4&format=npy")
    row = np.load(io.BytesIO(exact.content))[1, 1, :4]
    mpmath.mp.dps = 40
    truth = [mpmath.sin(mpmath.mpf(10000) ** (-mpmath.mpf(i) / 4) / (i + 1)) for i in range(4)]
    assert row.tolist() == [float(np.float32(float(value))) for value in truth]
    for refused in ("recipe=framework", "recipe=mlx", "scaling=llama3&factor=8"):
        response = client.get(f"/v1/rope/table?d_model=8&seq_len=2&freq_factors=1,2,3,4&{refused}")
        assert response.status_code == 422, refused
        assert response.json()["errors"][0]["loc"] == ["query", "freq_factors"]


def test_transformers_is_the_framework_recipe_spelled_once(
    client: Client,
) -> None:
    response = client.get("/v1/rope/table?d_model=8&seq_len=2&recipe=transformers")
    assert response.status_code == 200
    assert response.json()["params"]["recipe"] == "framework"


def _verified(client: Client, table: np.ndarray, query: str) -> dict[str, Any]:
    body = io.BytesIO()
    np.save(body, table)
    response = client.post(
        f"/v1/rope/verify?{query}",
        content=body.getvalue(),
        headers={"content-type": "application/x-npy"},
    )
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    return report


@pytest.mark.parametrize("recipe", ["ggml", "mlx"])
def test_a_runtime_s_cache_is_named_as_that_runtime_s_recipe(
    client: Client, recipe: Recipe
) -> None:
    params = RopeParams(d_model=64, base=500000.0)
    table = _runtime_cache(recipe, params, np.arange(100_000, 100_256))
    report = _verified(client, table, "d_model=64&base=500000&offset=100000")
    assert report["conforms"] is False
    names = [finding["name"] for finding in report["diagnosis"]]
    assert names == ["matches_recipe"], names
    evidence = report["diagnosis"][0]["evidence"]
    assert evidence["recipe"] == recipe
    assert evidence["max_ulp_from_recipe"] == 0
    assert evidence["max_abs_error_from_exact"] > 1e-4


def test_an_exact_cache_is_no_runtime_s(client: Client) -> None:
    table = encode(RopeParams(d_model=64, base=500000.0), np.arange(0, 256), "float32", "cos_sin")
    report = _verified(client, table, "d_model=64&base=500000")
    assert report["conforms"] is True
    assert all(f["name"] != "matches_recipe" for f in report["diagnosis"])


def test_posenc_testing_names_the_runtime_a_port_s_cache_is() -> None:
    """The assertion a port's suite runs says 'this is llama.cpp's rope', not 'imprecise'."""
    from posenc.testing import assert_rope_matches

    cache = _runtime_cache("ggml", RopeParams(d_model=32), np.arange(200_000, 200_064))
    with pytest.raises(AssertionError) as raised:
        assert_rope_matches(cache, d_model=32, offset=200_000)
    assert "matches_recipe" in str(raised.value)
    assert "recipe=ggml" in str(raised.value)


@pytest.mark.parametrize("recipe", ["exact", "framework", "ggml", "mlx"])
def test_longrope_from_an_original_length_of_one_is_refused_not_a_500(
    client: Client, recipe: str
) -> None:
    """Its attention factor divides by ln(original_max_position_embeddings) = 0: every recipe
    raised ZeroDivisionError before this refusal."""
    response = client.get(
        f"/v1/rope/table?d_model=2&seq_len=2&recipe={recipe}&scaling=longrope&factor=1.5"
        "&original_max_position_embeddings=1&short_factor=1&long_factor=2"
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["query", "original_max_position_embeddings"]


@pytest.mark.parametrize(
    ("recipe", "rotary", "status"),
    [("ggml", "chunked", 200), ("ggml", "interleaved", 200), ("ggml", "glm_pairs", 422),
     ("mlx", "chunked", 422)],
)  # fmt: skip
def test_m_rope_ids_take_llama_cpp_s_modes_and_not_mlx_lm_s(
    client: Client, recipe: str, rotary: str, status: int
) -> None:
    """llama.cpp turns (3, n) ids as MROPE or IMROPE; mlx-lm's mrope turns text positions only."""
    layout = "interleaved" if rotary == "glm_pairs" else "split"
    body = {
        "d_model": 16,
        "layout": layout,
        "recipe": recipe,
        "position_ids": [[0, 1, 2], [0, 3, 4], [0, 5, 6]],
        "mrope": {"section": [2, 3, 3], "rotary": rotary},
    }
    response = client.post("/v1/rope/encode", json=body)
    assert response.status_code == status, response.text
    if status == 422:
        assert response.json()["errors"][0]["loc"] == ["body", "recipe"]


def test_float16_past_its_range_is_refused_before_computing(client: Client) -> None:
    """The runtime's own angles (a factor of 2^-16 multiplies them by 65536) decide the
    refusal, not the exact rope's."""
    response = client.get(
        "/v1/rope/table?d_model=2&seq_len=2&recipe=ggml&freq_factors=0.0000152587890625"
        "&dtype=float16&component=angle"
    )
    assert response.status_code == 422, response.text


def test_a_cache_of_a_gguf_s_factor_tensor_is_verified_as_llama_cpp_s(client: Client) -> None:
    """verify holds a cache of a rope stated with a GGUF's own factors to the exact rope of
    those factors, and names llama.cpp's recipe when the cache is its (before, a 422)."""
    stated = RopeParams(d_model=4, freq_factors=(1.0, 2.0))
    table = _runtime_cache("ggml", stated, np.arange(100_000, 100_064))
    report = _verified(client, table, "d_model=4&freq_factors=1,2&offset=100000")
    (finding,) = report["diagnosis"]
    assert finding["name"] == "matches_recipe" and finding["evidence"]["recipe"] == "ggml"
    assert finding["evidence"]["max_ulp_from_recipe"] == 0


def test_mlx_s_dynamic_base_past_float32_is_refused(client: Client) -> None:
    response = client.get(
        "/v1/rope/table?d_model=4&base=1e12&recipe=mlx&scaling=dynamic&factor=1000000"
        "&original_max_position_embeddings=1&seq_len=1&offset=100000000"
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["query", "recipe"]


def test_mlx_s_dynamic_inv_freq_is_that_of_the_table_s_length() -> None:
    from posenc.schemes.rope import recipes

    params = RopeParams(
        d_model=8,
        recipe="mlx",
        scaling="dynamic",
        factor=4.0,
        original_max_position_embeddings=16,
    )
    inv_freq = encode(params, np.arange(1000), "float32", "inv_freq")
    grown = recipes.prepare(params, 1000)(np.ones(1, np.int64))[2][0]
    assert np.array_equal(inv_freq, grown)
    assert inv_freq[1] < 0.5 * encode(params, np.arange(2), "float32", "inv_freq")[1]


def test_llama_cpp_picks_longrope_factors_by_its_context() -> None:
    from posenc.schemes.rope.recipes import ggml

    short, long = (1.0, 1.5), (4.0, 8.0)
    given = {
        "d_model": 4,
        "recipe": "ggml",
        "scaling": "longrope",
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "short_factor": short,
        "long_factor": long,
    }
    assert ggml.derive(RopeParams(**given)).freq_factors == long  # type: ignore[arg-type]
    assert ggml.derive(RopeParams(**given, n_ctx=4096)).freq_factors == short  # type: ignore[arg-type]
    assert ggml.derive(RopeParams(**given, n_ctx=4097)).freq_factors == long  # type: ignore[arg-type]


def test_the_ggml_link_of_a_config_leaves_out_the_yarn_betas_llama_cpp_ignores(
    client: Client,
) -> None:
    config = {
        "model_type": "qwen2",
        "hidden_size": 64,
        "num_attention_heads": 2,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 1024,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
        },
    }
    urls = client.post("/v1/rope/config", json=config).json()["urls"]
    assert "beta_fast=16" in urls["table_framework"]
    assert "beta_fast" not in urls["table_ggml"] and "beta_slow" not in urls["table_ggml"]


@pytest.mark.parametrize("recipe", ["exact", "framework", "ggml", "mlx"])
def test_llama_4_s_rope_without_a_smooth_band_is_served_by_every_recipe(
    client: Client, recipe: str
) -> None:
    """low_freq_factor = high_freq_factor: transformers', llama.cpp's and MLX's formulas divide
    by zero in values they then leave unchosen; the framework recipe raised (a 500) before."""
    response = client.get(
        f"/v1/rope/table?d_model=128&base=500000&seq_len=4&recipe={recipe}&scaling=llama3"
        "&factor=16&low_freq_factor=1&high_freq_factor=1&original_max_position_embeddings=8192"
    )
    assert response.status_code == 200, response.text
