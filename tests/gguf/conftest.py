"""The tiny models llama.cpp's converter writes, converted once a session for every module that
holds the service to them."""

from __future__ import annotations

import pytest

from tests.gguf.converted import Converted, build_all


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Converted:
    return build_all(tmp_path_factory.mktemp("converted"))
