from __future__ import annotations

import pytest

from tests.system.dockerd import build_image


@pytest.fixture(scope="session")
def image() -> str:
    return build_image()
