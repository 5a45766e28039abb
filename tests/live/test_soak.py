"""A short soak (`make soak` runs the long one): mixed load, no 5xx, flat memory."""

from __future__ import annotations

import asyncio

import pytest

from bench import soak
from tests.live.conftest import start_server, stop_server

pytestmark = pytest.mark.live


def test_a_short_mixed_load_gets_no_server_error_and_memory_stays_flat() -> None:
    server = start_server(soak.SERVER_ENV)
    try:
        report = asyncio.run(soak.run(server.url, server.process.pid, seconds=20))
    finally:
        stop_server(server)
    print(report.summary())
    assert sum(report.statuses.values()) > 200
    assert {200, 413, 422} <= set(report.statuses)
    assert report.passed, report.summary()
