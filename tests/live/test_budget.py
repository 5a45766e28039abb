"""The memory budget is real: measured on a live uvicorn, not inferred from the cost model.

A crowd (tests/crowd.py) against a server with a small explicit budget must keep its peak
resident set (VmHWM) within idle + POSENC_MEMORY_BYTES + POSENC_CACHE_BYTES + SLACK. And a
query for 2·10⁹ positions, on any endpoint of any scheme, is refused from its parameters alone:
quickly, and without the peak resident set growing.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import crowd
from tests.live.bounded import SLACK_BYTES, memory, reset_peak, start_bounded_server
from tests.live.conftest import LiveServer, stop_server

pytestmark = [pytest.mark.live, pytest.mark.serial]
MEMORY_BYTES = 384 * 2**20
CACHE_BYTES = 64 * 2**20
REFUSAL_S = 0.050
# Peak growth allowed across all the refusals: far less than any array they name (the
# smallest, 2·10⁹ int32, is 8 GB); what ~110 small answers and a few 700 KB bodies cost Python's
# heap (measured 4.4–5.8 MiB here).
REFUSAL_GROWTH_BYTES = 8 * 2**20
FAR = 2_000_000_000


@pytest.fixture(scope="module")
def budgeted() -> Iterator[LiveServer]:
    server = start_bounded_server(
        {"POSENC_MEMORY_BYTES": str(MEMORY_BYTES), "POSENC_CACHE_BYTES": str(CACHE_BYTES)},
        via_make=True,
    )
    yield server
    stop_server(server)


def test_a_crowd_keeps_the_peak_resident_set_within_the_budget(budgeted: LiveServer) -> None:
    pid = budgeted.pid
    idle = memory(pid)["VmRSS"]
    reset_peak(pid)
    tally = crowd.run(budgeted.url, crowd.Limits.defaults(), seconds=30)
    peak = memory(pid)["VmHWM"]
    bound = idle + MEMORY_BYTES + CACHE_BYTES + SLACK_BYTES
    print(tally.summary(), f"\nidle {idle / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB")
    assert budgeted.process.poll() is None, "the server died under the crowd"
    served = sum(c[200] for kind, c in tally.statuses.items() if kind.startswith("largest"))
    assert served, "not one of the largest requests was served: the crowd proved nothing"
    assert peak <= bound, (
        f"peak {peak / 2**20:.0f} MiB > idle {idle / 2**20:.0f} + memory "
        f"{MEMORY_BYTES / 2**20:.0f} + cache {CACHE_BYTES / 2**20:.0f} + slack "
        f"{SLACK_BYTES / 2**20:.0f} MiB\n{tally.summary()}"
    )


@pytest.fixture(scope="module")
def plain() -> Iterator[LiveServer]:
    server = start_bounded_server({})
    yield server
    stop_server(server)


def far_queries(schemes: list[dict[str, Any]], max_positions: int) -> list[tuple[str, str]]:
    """(method and path, query or body) for 2·10⁹ positions on every endpoint of every scheme
    that takes positions: table, similarity and verify by seq_len (grid schemes: cells),
    encode by a far positions list (GET) and by one position over the count limit (POST)."""
    queries: list[tuple[str, str]] = []
    for scheme in schemes:
        names = {p["name"] for p in scheme["parameters"]}
        base = f"scheme={scheme['name']}" + ("&d_model=65532" if "d_model" in names else "")
        if "grid" in names:
            sides = int(next(p for p in scheme["parameters"] if p["name"] == "grid")["min_items"])
            side = round(FAR ** (1 / sides))  # side**sides ≈ 2·10⁹ cells
            rows = "grid=" + ",".join([str(side)] * sides)
        else:
            rows = f"seq_len={FAR}"
        endpoints = ["table", "verify"] + (["similarity"] if scheme["similarity"] else [])
        queries += [(f"GET /v1/{endpoint}", f"{base}&{rows}") for endpoint in endpoints]
        # A URL cannot list 2·10⁹ positions, nor even one more than the count limit (uvicorn
        # refuses a 130 KB request line); it can list 1500 positions near 2·10⁹ whose rows,
        # 65532 wide, are six times the element limit. The body can carry the count over.
        if "grid" not in names and "d_model" in names:
            positions = ",".join(str(FAR + k) for k in range(1500))
            queries.append(("GET /v1/encode", f"{base}&positions={positions}"))
        if "grid" not in names:
            document = {"scheme": scheme["name"], "positions": [FAR] * (max_positions + 1)}
            if "d_model" in names:
                document["d_model"] = 2
            queries.append(("POST /v1/encode", json.dumps(document)))
    return queries


def _ask(server: LiveServer, path: str, query: str) -> tuple[int, bytes, str | None, float]:
    # http.client: no limit on a URL's length. One connection per query, so that a server
    # that drops one cannot blame the next; a loopback connect costs far under 1 ms.
    connection = http.client.HTTPConnection(server.host, server.port, timeout=60)
    method, _, target = path.partition(" ")
    start = time.perf_counter()
    try:
        if method == "GET":
            connection.request(method, f"{target}?{query}")
        else:
            headers = {"Content-Type": "application/json"}
            connection.request(method, target, body=query, headers=headers)
        response = connection.getresponse()
        status, body = response.status, response.read()
        media_type = response.getheader("content-type")
    except (OSError, http.client.HTTPException) as e:
        status, body, media_type = 0, repr(e).encode(), None
    elapsed = time.perf_counter() - start
    connection.close()
    return status, body, media_type, elapsed


def test_a_query_for_two_billion_positions_is_refused_at_once_on_every_endpoint(
    plain: LiveServer,
) -> None:
    pid = plain.pid
    limits = crowd.Limits.defaults()
    slow, wrong = [], []
    schemes = httpx.get(f"{plain.url}/v1/schemes").json()["schemes"]
    queries = far_queries(schemes, limits.max_positions)
    for path, query in queries:  # one-time set-up (imports, first parses) out of the figures
        _ask(plain, path, query)
    reset_peak(pid)
    before = memory(pid)
    for path, query in queries:
        # The fastest of three: on a shared machine one try can lose the CPU for a while.
        tries = [_ask(plain, path, query) for _ in range(3)]
        status, body, media_type = tries[0][:3]
        elapsed = min(t[3] for t in tries)
        # limit-exceeded, or a parameter's own range (grid: at most 2^24 cells): both refuse
        # the query from its parameters alone.
        if status != 422 or media_type != "application/problem+json":
            wrong.append(f"{path}?{query[:70]}: {status} {body[:120]!r}")
        if elapsed >= REFUSAL_S:
            slow.append(f"{path}?{query[:70]}: {1000 * elapsed:.0f} ms")
    after = memory(pid)
    growth = after["VmHWM"] - max(before["VmHWM"], before["VmRSS"])
    assert not wrong, f"{len(wrong)} of {len(queries)} not refused with a 422:\n" + (
        "\n".join(wrong)
    )
    assert not slow, f"{len(slow)} of {len(queries)} refusals took ≥ 50 ms:\n" + "\n".join(slow)
    assert growth <= REFUSAL_GROWTH_BYTES, f"the peak grew by {growth / 2**20:.1f} MiB"
