"""Request ids, access logs, time limits and the thread pool: what operators rely on."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import Client


def test_a_given_request_id_is_echoed_and_a_missing_one_is_made(client: Client) -> None:
    given = client.get("/healthz", headers={"X-Request-ID": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42"
    made = client.get("/healthz").headers["x-request-id"]
    assert len(made) == 32 and made != client.get("/healthz").headers["x-request-id"]


@pytest.mark.parametrize("bad", [b"x" * 129, b"with space", "ünïcode".encode()])
def test_an_unusable_request_id_is_replaced(client: Client, bad: bytes) -> None:
    response = client.get("/healthz", headers={b"X-Request-ID": bad})
    made = response.headers["x-request-id"]
    assert made.encode() != bad and len(made) == 32


def test_every_request_writes_one_json_access_line(
    client: Client, capfd: pytest.CaptureFixture[str]
) -> None:
    url = "/v1/table?d_model=4&seq_len=2"
    client.get(url, headers={"X-Request-ID": "first"})
    client.get(url, headers={"X-Request-ID": "second"})
    client.get("/v1/table?d_model=0&seq_len=2", headers={"X-Request-ID": "third"})
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    access = {line["request_id"]: line for line in lines if line["logger"] == "posenc.access"}
    assert access["first"]["status"] == 200 and access["first"]["cache_hit"] is False
    assert access["second"]["cache_hit"] is True
    assert access["third"]["status"] == 422
    assert {"method", "path", "duration_ms", "bytes"} <= set(access["first"])


def test_a_request_over_the_time_limit_is_a_503_problem_with_retry_after(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(request_timeout_s=0.001)
    response = client.get("/v1/table?d_model=4096&seq_len=4096&format=bin")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["type"] == "urn:posenc:problem:timeout"
    assert "POSENC_REQUEST_TIMEOUT_S" in response.json()["detail"]


def test_log_level_comes_from_settings(client_with: Callable[..., Client]) -> None:
    import logging

    client_with(log_level="warning")
    assert logging.getLogger("posenc").level == logging.WARNING
    client_with(log_level="info")
    assert logging.getLogger("posenc").level == logging.INFO


def test_a_warning_in_a_serving_process_is_a_json_line_of_the_log(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A serving process logs Python warnings (NumPy's overflow in a cast once printed plain
    text between the JSON lines) as JSON lines of their own."""
    import logging
    import warnings

    from app.observability import log_warnings_as_json

    log_warnings_as_json()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # this suite turns warnings into errors
            warnings.warn("overflow encountered in cast", RuntimeWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
    out, err = capfd.readouterr()
    assert "overflow" not in err
    [line] = [json.loads(line) for line in out.splitlines() if "overflow" in line]
    assert line["level"] == "warning" and line["logger"] == "py.warnings"


def test_a_serving_process_leaves_what_it_started_with_to_no_collector() -> None:
    """As the server starts, the objects it holds for good are frozen: a full collection no
    longer walks the app's ~167k objects inside some request (90–116 ms each time)."""
    import gc
    import logging
    import sys

    from fastapi.testclient import TestClient

    from app.main import create_app

    interval = sys.getswitchinterval()
    try:
        with TestClient(create_app()):  # runs the app's lifespan, as a server starts it
            assert gc.get_freeze_count() > 10_000
    finally:  # what the lifespan set for the process, given back to the rest of the suite
        gc.unfreeze()
        logging.captureWarnings(False)
        sys.setswitchinterval(interval)
