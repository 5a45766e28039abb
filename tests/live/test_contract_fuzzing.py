"""Fuzz the live service from its own OpenAPI document: no 5xx, and every answer as documented."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    ]
)


@pytest.fixture(scope="module")
def small_live() -> Iterator[LiveServer]:
    # Small limits keep every generated request cheap, so the run stays within seconds.
    server = start_server(
        {
            "POSENC_MAX_ELEMENTS": str(2**16),
            "POSENC_MAX_TEXT_ELEMENTS": str(2**14),
            "POSENC_MAX_POSITIONS": "256",
        }
    )
    yield server
    stop_server(server)


def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
    small_live: LiveServer,
) -> None:
    # positive_data_acceptance is left out: whether a parameter applies depends on the scheme,
    # which a JSON schema of independent query parameters cannot say; such requests get 422s.
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli is not None, "schemathesis is a dev dependency"
    result = subprocess.run(
        [
            cli,
            "run",
            f"{small_live.url}/openapi.json",
            "--checks",
            CHECKS,
            "--max-examples",
            "25",
            "--seed",
            "1",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout
