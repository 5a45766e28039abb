"""What the command imports before it needs it: nothing heavy for help, no web stack or HTTP
client for a check in process. Read off ``python -X importtime``, not off the clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import check_args

HEAVY = {"numba", "numpy", "httpx", "posenc.registry", "posenc.numerics.kernels"}
WEB = {"fastapi", "starlette", "pydantic", "uvicorn", "httpx", "app"}


def imported(*args: str) -> set[str]:
    """Every module ``python -m posenc <args>`` imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "posenc", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    names = {line.rsplit("|", 1)[1].strip() for line in lines}
    assert "posenc.cli" in names  # the parse saw the command's imports
    return names


def test_help_imports_no_numba_numpy_registry_or_http_client() -> None:
    assert imported("--help") & HEAVY == set()
    assert imported("check", "--help") & {"httpx", "fastapi"} == set()


def test_a_check_in_process_imports_no_web_stack_and_no_http_client(caches: Path) -> None:
    names = imported(*check_args(caches, "correct-float32"))
    assert "posenc.registry" in names
    assert names & WEB == set()
