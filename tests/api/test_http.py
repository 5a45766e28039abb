"""Caching, compression, CORS, limits and operations: the HTTP behaviour of API.md §4."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Client

TABLE = "/v1/table?d_model=64&seq_len=32"


def test_get_answers_with_a_strong_etag_and_immutable_caching(client: Client) -> None:
    response = client.get(TABLE)
    etag = response.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "Accept" in response.headers["vary"]


def test_matching_if_none_match_gets_304_with_no_body(client: Client) -> None:
    etag = client.get(TABLE).headers["etag"]
    again = client.get(TABLE, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    other = client.get(TABLE, headers={"If-None-Match": '"something-else"'})
    assert other.status_code == 200


def test_equivalent_queries_share_one_etag(client: Client) -> None:
    a = client.get("/v1/table?d_model=8&seq_len=4&base=10000").headers["etag"]
    b = client.get("/v1/table?seq_len=4.0&base=1e4&d_model=8").headers["etag"]
    c = client.get("/v1/table?d_model=8&seq_len=4&base=10001").headers["etag"]
    assert a == b != c


def test_each_format_has_its_own_etag(client: Client) -> None:
    tags = {client.get(f"{TABLE}&format={f}").headers["etag"] for f in ("json", "csv", "bin")}
    assert len(tags) == 3


def test_json_over_a_kibibyte_is_gzipped_when_accepted(client: Client) -> None:
    plain = client.get(TABLE, headers={"Accept-Encoding": "identity"})
    zipped = client.get(TABLE, headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    # httpx decodes for us: the bodies must be identical, and the tags differ.
    assert zipped.content == plain.content
    assert zipped.headers["etag"] != plain.headers["etag"]
    small = client.get("/v1/table?d_model=2&seq_len=1", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in small.headers


def test_binary_bodies_are_never_gzipped(client: Client) -> None:
    response = client.get(TABLE + "&format=bin", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in response.headers
    assert len(response.content) == 64 * 32 * 4


def test_cors_allows_any_origin_and_exposes_the_array_headers(client: Client) -> None:
    response = client.get(TABLE + "&format=bin", headers={"Origin": "https://example.org"})
    assert response.headers["access-control-allow-origin"] == "*"
    exposed = response.headers["access-control-expose-headers"].lower()
    expected = {"x-array-shape", "x-array-dtype", "etag", "x-next-position-delta"}
    assert expected <= set(map(str.strip, exposed.split(",")))
    assert "access-control-allow-credentials" not in response.headers


def test_cors_origins_come_from_settings(client_with: Callable[..., Client]) -> None:
    client = client_with(cors_origins="https://a.example")
    allowed = client.get(TABLE, headers={"Origin": "https://a.example"})
    refused = client.get(TABLE, headers={"Origin": "https://b.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://a.example"
    assert "access-control-allow-origin" not in refused.headers


def test_repeated_requests_do_no_recomputation(client: Client) -> None:
    first = client.get(TABLE)
    before = client.app.state.cache.stats()
    for _ in range(3):
        again = client.get(TABLE)
        assert again.content == first.content
        assert again.headers["etag"] == first.headers["etag"]
    after = client.app.state.cache.stats()
    assert after.misses == before.misses
    assert after.hits == before.hits + 3


def test_equivalent_spellings_reuse_the_computed_array(client: Client) -> None:
    client.get("/v1/table?d_model=8&seq_len=4&base=10000")
    before = client.app.state.cache.stats()
    client.get("/v1/table?base=1e4&seq_len=4&d_model=8")
    after = client.app.state.cache.stats()
    assert after.hits == before.hits + 1  # the array, found under its canonical parameters


def test_a_replayed_answer_honours_if_none_match(client: Client) -> None:
    etag = client.get(TABLE).headers["etag"]
    client.get(TABLE)
    assert client.get(TABLE, headers={"If-None-Match": etag}).status_code == 304


def test_table_too_large_is_refused_with_its_size_and_the_limit(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(max_elements=1000)
    response = client.get("/v1/table?d_model=100&seq_len=11&format=bin")
    problem = response.json()
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert problem["type"] == "urn:posenc:problem:limit-exceeded"
    assert "1100" in problem["detail"] and "1000" in problem["detail"]
    assert problem["errors"][0]["loc"] == ["query", "seq_len"]
    assert client.app.state.cache.stats().misses == 0


def test_text_formats_have_their_own_lower_limit(client_with: Callable[..., Client]) -> None:
    client = client_with(max_text_elements=100)
    assert client.get("/v1/table?d_model=10&seq_len=11&format=bin").status_code == 200
    refused = client.get("/v1/table?d_model=10&seq_len=11&format=csv")
    assert refused.status_code == 422
    assert "POSENC_MAX_TEXT_ELEMENTS" in refused.json()["detail"]


def test_similarity_counts_n_squared_values(client_with: Callable[..., Client]) -> None:
    client = client_with(max_elements=400)
    assert client.get("/v1/similarity?d_model=2&seq_len=20&format=bin").status_code == 200
    refused = client.get("/v1/similarity?d_model=2&seq_len=21&format=bin")
    assert refused.json()["type"] == "urn:posenc:problem:limit-exceeded"
    assert "441" in refused.json()["detail"]
    vector = client.get("/v1/similarity?d_model=2&seq_len=21&reference=3&format=bin")
    assert vector.status_code == 200


def test_positions_list_is_limited(client_with: Callable[..., Client]) -> None:
    client = client_with(max_positions=3)
    assert client.get("/v1/encode?d_model=2&positions=1,2,3").status_code == 200
    refused = client.get("/v1/encode?d_model=2&positions=1,2,3,4")
    assert refused.json()["errors"][0]["loc"] == ["query", "positions"]


def test_oversized_body_is_413_problem(client_with: Callable[..., Client]) -> None:
    client = client_with(max_body_bytes=200)
    body = {"d_model": 2, "positions": list(range(100))}
    response = client.post("/v1/encode", json=body)
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["title"] == "Content Too Large"


def test_health_readiness_and_schemes(client: Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    schemes = client.get("/v1/schemes").json()["schemes"]
    sinusoidal = next(s for s in schemes if s["name"] == "sinusoidal")
    d_model = next(p for p in sinusoidal["parameters"] if p["name"] == "d_model")
    assert (d_model["minimum"], d_model["maximum"]) == (1, 65536)


def test_metrics_count_requests_by_route_and_status_and_the_cache(client: Client) -> None:
    client.get(TABLE)
    client.get(TABLE)
    client.get("/v1/table?d_model=0&seq_len=1")
    text = client.get("/metrics").text
    assert 'posenc_requests_total{method="GET",route="/v1/table",status="200"} 2.0' in text
    assert 'posenc_requests_total{method="GET",route="/v1/table",status="422"} 1.0' in text
    assert "posenc_request_duration_seconds_bucket" in text
    assert "posenc_cache_hits_total 1.0" in text
    assert "posenc_cache_bytes " in text


def test_openapi_documents_every_parameter_with_its_range(client: Client) -> None:
    spec = client.get("/openapi.json").json()
    parameters = {p["name"]: p for p in spec["paths"]["/v1/sinusoidal/table"]["get"]["parameters"]}
    assert {"d_model", "seq_len", "offset", "base", "layout", "dtype", "format"} <= set(parameters)
    assert "scheme" not in parameters and "num_heads" not in parameters
    d_model = parameters["d_model"]
    assert d_model["required"] is True
    assert (d_model["schema"]["minimum"], d_model["schema"]["maximum"]) == (1, 65536)
    rope = {p["name"]: p for p in spec["paths"]["/v1/rope/table"]["get"]["parameters"]}
    assert rope["d_model"]["schema"]["multipleOf"] == 2 and "scaling" in rope
    assert client.get("/docs").status_code == 200


@pytest.mark.parametrize("path", ["/v1/table", "/v1/encode", "/v1/similarity", "/v1/verify"])
def test_no_response_carries_a_server_banner_or_sniffable_type(client: Client, path: str) -> None:
    response = client.get(path + "?d_model=4&seq_len=2")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "server" not in response.headers


def test_a_long_positions_list_is_cached_under_a_short_key(client: Client) -> None:
    """The cache bounds the bytes of its values, not of its keys: 1200 listed positions as
    bytes were a 9.6 KiB key for a 4.8 KiB table (d_model=1, float32)."""
    positions = ",".join(str(p) for p in range(2**31 - 1, 0, -(2**21))[:1200])
    answer = client.get(f"/v1/sinusoidal/encode?d_model=1&format=npy&positions={positions}")
    assert answer.status_code == 200
    # The array's entry (the replayed answer's counts its query: app/replay.py).
    keys = [k for k in client.app.state.cache._entries if isinstance(k, tuple) and k[0] == "array"]
    assert keys, "the table was cached"
    assert max(len(repr(key)) for key in keys) < 1024
