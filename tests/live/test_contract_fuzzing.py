"""Fuzz the live service from its own OpenAPI document: no 5xx, and every answer as documented."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

CONTRACT = Path(__file__).parent / "contract"


@pytest.fixture(scope="module")
def small_live() -> Iterator[LiveServer]:
    # Small limits keep every generated request cheap, so the run stays within a minute.
    server = start_server(
        {
            "POSENC_MAX_ELEMENTS": str(2**16),
            "POSENC_MAX_TEXT_ELEMENTS": str(2**14),
            "POSENC_MAX_POSITIONS": "256",
            "POSENC_LOG_LEVEL": "warning",
        }
    )
    yield server
    stop_server(server)


def test_schemathesis_finds_every_answer_as_documented_and_every_valid_request_served(
    small_live: LiveServer,
) -> None:
    """Every check (``--checks all``) in every phase, with the contract's one rule for refusing
    schema-valid requests (contract/schemathesis.toml) and its own check (contract/hooks.py)."""
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli is not None, "schemathesis is a dev dependency"
    result = subprocess.run(
        [
            cli,
            "run",
            f"{small_live.url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "8",
            "--seed",
            "1",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=CONTRACT,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "hooks", "PYTHONPATH": str(CONTRACT)},
    )
    assert result.returncode == 0, result.stdout[-6000:]
    assert "Tested:" in result.stdout
