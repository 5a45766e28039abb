"""The replayed answers count what they hold: keys and objects, not just the bytes sent.

The cache's bound is in bytes, so an entry that holds more than it counts lets the cache outgrow
its capacity. A GET's replay entry is kept under its query string, which a client chooses: one
table asked for under many spellings (``base=10000.0``, ``base=10000.00``, …) is one array and as
many replay entries, each holding its query.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from tests.conftest import get_scope

SPELLINGS = 200


async def _get(app: Any, path: str, query: bytes) -> int:
    """One GET straight through the ASGI app: no client whose own objects tracemalloc would
    count with the server's."""
    scope = get_scope(path, query)
    status = 0
    requested, answered = False, asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()  # as a server does: the next message is the client leaving
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif not message.get("more_body", False):
            answered.set()

    await app(scope, receive, send)
    return status


@pytest.mark.parametrize("fmt", ["bin", "json"])
@pytest.mark.parametrize("padding", [0, 8000], ids=["short-query", "long-query"])
def test_replay_entries_hold_no_more_than_the_cache_counts(fmt: str, padding: int) -> None:
    app = create_app(Settings(cache_bytes=2**30, log_level="warning"))
    cache = app.state.cache

    def query(k: int) -> bytes:
        zeros = "0" * (padding + k)
        return f"d_model=2&seq_len=1&base=10000.{zeros}1&format={fmt}".encode()

    async def spell(first: int, count: int) -> list[int]:
        return [await _get(app, "/v1/sinusoidal/table", query(k)) for k in range(first, count)]

    # The array and every one-time set-up first; its replay entry too.
    assert asyncio.run(spell(SPELLINGS, SPELLINGS + 2)) == [200, 200]
    tracemalloc.start()
    try:
        gc.collect()
        traced, counted = tracemalloc.get_traced_memory()[0], cache.stats().bytes
        assert asyncio.run(spell(0, SPELLINGS)) == [200] * SPELLINGS
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced
    finally:
        tracemalloc.stop()
    counted = cache.stats().bytes - counted
    assert cache.stats().entries >= SPELLINGS  # nothing evicted: all of them are held
    assert traced <= counted, (
        f"{SPELLINGS} replay entries hold {traced / SPELLINGS:.0f} bytes each and count "
        f"{counted / SPELLINGS:.0f}"
    )
