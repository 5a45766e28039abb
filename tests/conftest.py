from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.settings import Settings


class Client:
    """httpx against the ASGI app, through a synchronous face so tests read as plain calls."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.app = create_app(settings)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
                return await c.request(method, url, **kwargs)

        return asyncio.run(send())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)


def get_scope(path: str, query: bytes, host: str = "testserver") -> dict[str, Any]:
    """The ASGI scope of a plain GET, for tests that drive the app without a client."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", host.encode())],
        "client": ("127.0.0.1", 1),
        "server": (host, 80),
    }


@pytest.fixture
def client() -> Client:
    return Client()


@pytest.fixture
def client_with() -> Callable[..., Client]:
    def make(**settings: Any) -> Client:
        return Client(Settings(**settings))

    return make


@pytest.fixture(scope="session")
def bounded_walk() -> list[Any]:
    """The walk of every operation at its extremes, in process (tests/walk.py): run once, read
    by the in-process test and by the live one (which holds RSS to these reservations)."""
    from tests.walk import walk_in_process

    return walk_in_process()
