from __future__ import annotations

from pathlib import Path

import pytest

from tests.onnx.build import built


@pytest.fixture(scope="session")
def builds() -> Path:
    """Every build of tests.onnx.build.BUILDS, made once (and kept under $POSENC_CACHE)."""
    return built()


@pytest.fixture(scope="session")
def real_shapes() -> Path:
    """tests.onnx.build.REAL_SHAPES built once: two real models' shapes with tiny widths."""
    from tests.onnx.build import REAL_SHAPES

    return built(REAL_SHAPES)
