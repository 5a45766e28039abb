"""The page in a real chromium and the JavaScript client, against a live server (node --test)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live.conftest import LiveServer, live

pytestmark = [pytest.mark.live, pytest.mark.system]
__all__ = ["live"]  # the live-server fixture, shared with tests/live
ROOT = Path(__file__).resolve().parents[2]


def _node(live: LiveServer | None, *arguments: str) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node is not None, "node is on every machine of this project"
    env = {
        **os.environ,
        "POSENC_ARTIFACTS": str(ROOT / "test-artifacts"),
        "POSENC_PYTHON": sys.executable,
    }
    if live is not None:
        env["POSENC_URL"] = live.url
    return subprocess.run(
        [node, *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_the_page_type_checks_against_the_openapi_document_and_is_bundled() -> None:
    result = _node(None, "tests/browser/build.mjs", "--check")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_page_draws_every_view_in_chromium(live: LiveServer) -> None:
    assert Path("/usr/bin/chromium").exists(), "make test installs Debian's chromium"
    assert (ROOT / "tests/browser/node_modules/playwright-core").exists(), "make test runs npm ci"
    result = _node(live, "--test", "tests/browser/page.test.mjs")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# pass 21" in result.stdout
    views = ROOT / "test-artifacts/views"
    for width in (1200, 375):
        assert (views / f"{width}-rope-rotation.png").stat().st_size > 10_000
        assert (views / f"{width}-gemma3-config.png").stat().st_size > 10_000
        assert (views / f"{width}-layout.png").stat().st_size > 10_000
        assert (views / f"{width}-applied.png").stat().st_size > 10_000


def test_the_javascript_example_client_reads_exact_values(live: LiveServer) -> None:
    result = _node(live, "--test", "examples/js/client.test.mjs")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# pass 3" in result.stdout
