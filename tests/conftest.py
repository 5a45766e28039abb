from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.settings import Settings

# The files that take minutes, in the order make test's workers should start them (a file to a
# worker): begun first, they end beside the short ones instead of after them. Measured with
# --durations on the 2-core machine; a file missing here only starts in its turn.
LONGEST_FIRST = (
    "tests/reference/test_model_ropes.py",
    "tests/live/test_contract_fuzzing.py",
    "tests/api/test_costs.py",
    "tests/system/test_container.py",
    "tests/browser/test_page.py",
    "tests/gguf/test_converter.py",
    "tests/clients/test_generated_clients.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


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
