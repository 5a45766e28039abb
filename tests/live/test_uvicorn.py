"""The service as `make run` starts it: a real uvicorn process, spoken to over real sockets."""

from __future__ import annotations

import gzip
import http.client
import io

import httpx
import numpy as np
import pytest

from posenc import SinusoidalParams, table
from tests.live.conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live


def test_every_endpoint_answers_over_http(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        for path in (
            "/v1/table?d_model=8&seq_len=4",
            "/v1/encode?d_model=8&positions=0,5,17",
            "/v1/similarity?d_model=8&seq_len=4",
            "/v1/verify?d_model=8",
            "/v1/schemes",
            "/healthz",
            "/readyz",
            "/metrics",
            "/openapi.json",
            "/docs",
        ):
            assert client.get(path).status_code == 200, path
        posted = client.post("/v1/encode", json={"d_model": 8, "positions": [1]})
        assert posted.json()["shape"] == [1, 8]


def test_bin_table_matches_the_core_bit_for_bit(live: LiveServer) -> None:
    response = httpx.get(f"{live.url}/v1/table?d_model=512&seq_len=64&offset=1000000&format=bin")
    served = np.frombuffer(response.content, "<f4").reshape(64, 512)
    assert np.array_equal(served, table(SinusoidalParams(d_model=512), 64, 10**6, "float32"))


def test_npy_over_the_wire_loads(live: LiveServer) -> None:
    response = httpx.get(f"{live.url}/v1/table?d_model=3&seq_len=2&format=npy&dtype=float64")
    assert np.load(io.BytesIO(response.content)).shape == (2, 3)


def test_gzip_reaches_the_client_as_gzip_bytes(live: LiveServer) -> None:
    connection = http.client.HTTPConnection(live.host, live.port, timeout=10)
    connection.request(
        "GET", "/v1/table?d_model=64&seq_len=64", headers={"Accept-Encoding": "gzip"}
    )
    response = connection.getresponse()
    raw = response.read()
    assert response.getheader("Content-Encoding") == "gzip"
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw).startswith(b'{"scheme":"sinusoidal"')
    assert response.getheader("Server") is None
    connection.close()


def test_etag_round_trip_gives_304(live: LiveServer) -> None:
    url = f"{live.url}/v1/table?d_model=16&seq_len=16&format=bin"
    etag = httpx.get(url).headers["etag"]
    assert httpx.get(url, headers={"If-None-Match": etag}).status_code == 304


def test_errors_over_the_wire_are_problem_json(live: LiveServer) -> None:
    response = httpx.get(f"{live.url}/v1/table?d_model=0&seq_len=1")
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"


def test_host_and_port_come_from_the_environment_and_sigterm_stops_cleanly() -> None:
    server = start_server({"POSENC_MAX_ELEMENTS": "10"})
    try:
        refused = httpx.get(f"{server.url}/v1/table?d_model=4&seq_len=3")
        assert refused.json()["type"] == "urn:posenc:problem:limit-exceeded"
    finally:
        log = stop_server(server)
    # uvicorn finishes in-flight work, then re-raises SIGTERM so the exit status says why.
    assert server.process.returncode in (0, -15)
    assert "Finished server process" in log
