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
