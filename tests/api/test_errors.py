"""Every bad input of API.md gets a 4xx problem+json that names the parameter; never a 5xx."""

from __future__ import annotations

import pytest

from tests.conftest import Client

BAD_QUERIES = [
    ("/v1/table?d_model=0&seq_len=3", "d_model"),
    ("/v1/table?d_model=-4&seq_len=3", "d_model"),
    ("/v1/table?d_model=4.5&seq_len=3", "d_model"),
    ("/v1/table?d_model=NaN&seq_len=3", "d_model"),
    ("/v1/table?d_model=1e40&seq_len=3", "d_model"),
    ("/v1/table?d_model=abc&seq_len=3", "d_model"),
    ("/v1/table?d_model=65537&seq_len=3", "d_model"),
    ("/v1/table?d_model=%D9%A3&seq_len=3", "d_model"),  # Arabic-Indic three
    ("/v1/table?d_model=4&seq_len=0", "seq_len"),
    ("/v1/table?d_model=4&seq_len=3.5", "seq_len"),
    ("/v1/table?d_model=4", "seq_len"),
    ("/v1/table?d_model=4&seq_len=3&offset=-1", "offset"),
    ("/v1/table?d_model=4&seq_len=3&offset=2147483648", "offset"),
    ("/v1/table?d_model=4&seq_len=3&offset=2147483647", "seq_len"),
    ("/v1/table?d_model=4&seq_len=3&base=1", "base"),
    ("/v1/table?d_model=4&seq_len=3&base=nan", "base"),
    ("/v1/table?d_model=4&seq_len=3&base=inf", "base"),
    ("/v1/table?d_model=4&seq_len=3&base=1e13", "base"),
    ("/v1/table?d_model=4&seq_len=3&layout=diagonal", "layout"),
    ("/v1/table?d_model=4&seq_len=3&dtype=int8", "dtype"),
    ("/v1/table?d_model=4&seq_len=3&format=xml", "format"),
    ("/v1/table?d_model=4&seq_len=3&scheme=unknown", "scheme"),
    ("/v1/table?d_model=4&seq_len=3&d_modle=4", "d_modle"),
    ("/v1/encode?d_model=4&positions=3.5", "positions"),
    ("/v1/encode?d_model=4&positions=1,-1", "positions"),
    ("/v1/encode?d_model=4&positions=1e40", "positions"),
    ("/v1/encode?d_model=4&positions=", "positions"),
    ("/v1/encode?d_model=4&positions=2147483648", "positions"),
    ("/v1/encode?d_model=4", "positions"),
    ("/v1/similarity?d_model=4&seq_len=3&metric=manhattan", "metric"),
    ("/v1/similarity?d_model=4&seq_len=3&reference=-2", "reference"),
    ("/v1/verify?d_model=4&format=csv", "format"),
]


@pytest.mark.parametrize(("url", "param"), BAD_QUERIES)
def test_bad_query_is_422_problem_naming_the_parameter(
    client: Client, url: str, param: str
) -> None:
    response = client.get(url)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 422 and problem["title"] == "Unprocessable Content"
    # positions past 2^31 are a limit on a sum of parameters, each in its own range
    beyond = "offset=2147483647" in url
    assert problem["type"] == ("urn:posenc:problem:limit-exceeded" if beyond else "about:blank")
    assert param in [error["loc"][1] for error in problem["errors"]]
    assert param in problem["detail"]
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"d_model": 2, "positions": [0, 1], "embeddings": [[1.0, 2.0]]}, ["body", "embeddings"]),
        ({"d_model": 2, "positions": [0], "embeddings": [[1.0, 2.0, 3.0]]}, ["body", "embeddings"]),
        ({"d_model": 2, "positions": [0.5]}, ["body", "positions", 0]),
        ({"d_model": 2, "positions": [True]}, ["body", "positions", 0]),
        ({"d_model": 2, "positions": []}, ["body", "positions"]),
        ({"positions": [0]}, ["body", "d_model"]),
        # found by schemathesis: an explicit null was a 500
        ({"d_model": None, "positions": [4285.0, 1140.0, 179]}, ["body", "d_model"]),
        ({"d_model": 2, "positions": [0], "scale": "maybe"}, ["body", "scale"]),
        ({"d_model": 2, "positions": [0], "extra": 1}, ["body", "extra"]),
        (
            {"d_model": 2, "positions": [0], "embeddings": [["x", 1.0]]},
            ["body", "embeddings", 0, 0],
        ),
    ],
)
def test_bad_body_is_422_problem_naming_the_field(
    client: Client, body: dict[str, object], loc: list[object]
) -> None:
    response = client.post("/v1/encode", json=body)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert loc in [error["loc"] for error in response.json()["errors"]]


def test_wrong_embeddings_shape_says_which_shape_was_expected(client: Client) -> None:
    body = {"d_model": 3, "positions": [0, 1], "embeddings": [[1.0, 2.0, 3.0]]}
    assert "[2, 3]" in client.post("/v1/encode", json=body).json()["detail"]


@pytest.mark.parametrize(
    "content", [b"{", b"[]", b"null", b'{"d_model": 2, "positions": {"0": 1}}', b"\xff\xfe"]
)
def test_malformed_bodies_are_4xx_never_5xx(client: Client, content: bytes) -> None:
    response = client.post(
        "/v1/encode", content=content, headers={"Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"] == "application/problem+json"


def test_unknown_path_and_method_are_problems_too(client: Client) -> None:
    missing = client.get("/v1/nothing")
    wrong_method = client.request("DELETE", "/v1/table")
    assert missing.status_code == 404 and wrong_method.status_code == 405
    for response in (missing, wrong_method):
        assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "url",
    [
        # The relative-map check once received the infinities and LAPACK raised: a 500.
        "/v1/index/verify?offset=1269539&seq_len=723217&dtype=float16&d_model=1",
        "/v1/index/table?offset=70000&seq_len=2&dtype=float16&d_model=1",
        "/v1/index/encode?positions=3,70000&dtype=float16&d_model=1",
        # Once an overflow warning printed to stderr for a request then refused.
        "/v1/alibi/encode?num_heads=8&positions=0,200000&dtype=float16",
        "/v1/rope/table?d_model=8&seq_len=2&offset=70000&component=angle&dtype=float16",
        "/v1/rope/table?d_model=8&seq_len=2&attention_factor=1e5&scaling=yarn&factor=2"
        "&original_max_position_embeddings=64"
        "&dtype=float16",
    ],
)
def test_a_dtype_that_cannot_hold_the_array_is_refused_before_computing(
    client: Client, url: str
) -> None:
    """float16 past 65504 is refused from the parameters, naming dtype: no check receives an
    infinity, and no overflow warning reaches the log (pytest turns one into an error)."""
    response = client.get(url)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"][-1] == "dtype"
    assert "65504" in problem["detail"]


@pytest.mark.parametrize(
    "url",
    [
        "/v1/index/table?offset=65000&seq_len=2&dtype=float16&d_model=1",
        "/v1/alibi/table?num_heads=8&seq_len=200&offset=1000000000&dtype=float16",
        "/v1/rope/table?d_model=8&seq_len=2&offset=60000&component=angle&dtype=float16",
    ],
)
def test_what_float16_holds_is_served(client: Client, url: str) -> None:
    # ALiBi's bias follows the distances, not the positions: far rows are fine.
    assert client.get(url + "&format=npy").status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"d_model": 2, "positions": [1], "dtype": "float32", "embeddings": [[1e300, 0.0]]},
        {"d_model": 2, "positions": [1], "dtype": "float16", "embeddings": [[7e4, 0.0]]},
        {"d_model": 4, "positions": [1], "dtype": "float32", "vectors": [[1e300, 0, 1e300, 0]]},
        {"d_model": 4, "positions": [1], "dtype": "float16", "vectors": [[7e4, 0, 7e4, 0]]},
    ],
)
def test_given_data_that_the_dtype_cannot_hold_is_refused_by_name(
    client: Client, body: dict[str, object]
) -> None:
    """Embeddings or vectors past the dtype's range: a 422 naming them (float32 answered
    JSON nulls; a float16 rotation warned, a 500 under this suite)."""
    scheme = "rope" if "vectors" in body else "sinusoidal"
    response = client.post(f"/v1/{scheme}/encode", json=body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"][-1] in ("embeddings", "vectors")
