from __future__ import annotations

from pathlib import Path

import pytest

from tests.onnx.build import built


@pytest.fixture(scope="session")
def builds() -> Path:
    """Every build of tests.onnx.build.BUILDS, made once (and kept under $POSENC_CACHE)."""
    return built()
