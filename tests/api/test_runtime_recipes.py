"""recipe=ggml and recipe=mlx over HTTP: refusals name the recipe, and a cache a runtime built is
diagnosed as that runtime's recipe rather than as imprecise float32 angles."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from posenc.schemes.rope.maths import encode
from posenc.schemes.rope.params import Recipe, RopeParams
from tests.conftest import Client


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


def test_freq_factors_and_n_ctx_belong_to_recipe_ggml(client: Client) -> None:
    response = client.get("/v1/rope/table?d_model=8&seq_len=2&freq_factors=1,2,3,4")
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["query", "freq_factors"]
    served = client.get(
        "/v1/rope/table?d_model=8&seq_len=2&recipe=ggml&freq_factors=1,2,3,4&format=npy"
    )
    assert served.status_code == 200
    table = np.load(io.BytesIO(served.content))
    factors = np.array([1, 2, 3, 4], dtype=np.float32)
    theta = np.float32(1.0) * np.float32(10000.0) ** (-np.arange(4) / 4)
    assert np.allclose(table[1, 1, :4], np.sin(theta / factors), atol=1e-6)


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
    params = RopeParams(d_model=64, base=500000.0, recipe=recipe)
    table = encode(params, np.arange(100_000, 100_256), "float32", "cos_sin")
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

    cache = encode(
        RopeParams(d_model=32, base=10000.0, recipe="ggml"),
        np.arange(200_000, 200_064),
        "float32",
        "cos_sin",
    )
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
