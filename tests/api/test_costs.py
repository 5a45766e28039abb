"""The cost model is an upper bound: what serving a request really allocates (tracemalloc, from
the moment the request arrives until its last byte is sent) never exceeds what it reserved.

If a change makes an operation allocate more than its declared cost, this fails, so the budget
cannot drift below reality as the code changes."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from app.admission import HOLDING
from app.main import create_app
from app.settings import Settings
from posenc.warm import compile_kernels

FORMATS = ("json", "npy", "bin", "csv", "plotly", "png")
# Rows × width chosen so that per-value costs dominate the fixed ones: ~0.5–1 M values.
SCHEMES = {
    "sinusoidal": "d_model=512&seq_len=2048",
    "sinusoidal&convention=fairseq": "d_model=511&seq_len=2048",
    "rope": "d_model=128&seq_len=4096",
    "rope&component=cos": "d_model=128&seq_len=4096",
    "rope&component=angle": "d_model=128&seq_len=4096",
    "rope&recipe=framework&scaling=yarn&factor=4&original_max_position_embeddings=1024": (
        "d_model=128&seq_len=4096"
    ),
    "rope&rotary_pairs=16": "d_model=128&seq_len=4096",
    "rope&recipe=framework&rotary_pairs=16&scaling=linear&factor=8": "d_model=128&seq_len=4096",
    "sinusoidal&recipe=framework": "d_model=512&seq_len=2048",
    "sinusoidal&recipe=framework&convention=tensor2tensor": "d_model=512&seq_len=2048",
    "alibi": "num_heads=4&seq_len=512",
    "t5": "seq_len=1024",
    "sinusoidal2d": "d_model=256&grid=64,64",
    "sinusoidal3d": "d_model=192&grid=16,16,16",
    "index": "d_model=256&seq_len=4096",
    "binary": "d_model=256&seq_len=4096",
}


class PeakOfEachRequest:
    """Resets tracemalloc's peak as a request arrives and reads it after its response is sent,
    beside the bytes the request reserved."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.measured: list[tuple[int, int]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        try:
            await self.app(scope, receive, send)
        finally:  # a 500 re-raised after its answer is measured too
            _, peak = tracemalloc.get_traced_memory()
            reserved = sum(scope[HOLDING].reserved) if HOLDING in scope else 0
            self.measured.append((peak - before, reserved))


@pytest.fixture(scope="module")
def compiled() -> None:
    # Loading the compiled loops is the process's start-up, not any one request's cost.
    compile_kernels()


@pytest.fixture
def tracing(compiled: None) -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _measure(urls: list[str], headers: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """Each URL on a fresh app (a cold cache), the previous answer dropped before the next."""
    outcomes: list[tuple[str, int, int, int]] = []

    async def send(url: str) -> int:
        transport = httpx.ASGITransport(app=probe)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get(url, headers=headers)).status_code

    for url in urls:
        gc.collect()  # the last app and its cache go now, not in the middle of the next request
        probe = PeakOfEachRequest(create_app(Settings(memory_bytes=2**31, cache_bytes=2**30)))
        status = asyncio.run(send(url))
        [(peak, reserved)] = probe.measured
        outcomes.append((url, status, peak, reserved))
    return outcomes


def _urls(scheme: str, rows: str) -> list[str]:
    base = f"scheme={scheme}&{rows}"
    return [
        *(f"/v1/table?{base}&format={fmt}" for fmt in FORMATS),
        *(f"/v1/table?{base}&format=bin&dtype=float64" for _ in [0] if "t5" not in scheme),
        *(f"/v1/table?{base}&format=json&dtype=float16" for _ in [0] if "t5" not in scheme),
    ]


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(("scheme", "rows"), SCHEMES.items(), ids=list(SCHEMES))
def test_no_table_allocates_more_than_it_reserved(
    tracing: None, scheme: str, rows: str, gzip: bool
) -> None:
    headers = {"accept-encoding": "gzip" if gzip else "identity"}
    for url, status, peak, reserved in _measure(_urls(scheme, rows), headers):
        assert status == 200, url
        assert 0 < peak <= reserved, f"{url}: measured {peak} > declared {reserved}"


@pytest.mark.parametrize(
    "url",
    [
        "/v1/encode?d_model=512&positions=" + ",".join(map(str, range(0, 2**31 - 1, 2**20))),
        "/v1/encode?scheme=rope&d_model=256&format=json&positions="
        + ",".join(map(str, range(2048))),
        "/v1/similarity?d_model=64&seq_len=1024&format=bin",
        "/v1/similarity?d_model=64&seq_len=1024&metric=euclidean&format=json",
        "/v1/similarity?scheme=rope&d_model=64&seq_len=1024&reference=7",
        # Few rows of wide vectors: the rotations, not the comparisons, dominate.
        "/v1/similarity?scheme=rope&d_model=1024&seq_len=512&reference=7&format=bin",
        "/v1/similarity?scheme=rope&d_model=1024&seq_len=512&reference=99999&format=bin",
        "/v1/similarity?d_model=1024&seq_len=512&reference=3&format=bin",
        # Narrow tables of many rows: what costs per row, not per value, dominates.
        "/v1/table?d_model=2&seq_len=2097152&format=npy",
        "/v1/table?d_model=2&seq_len=2097152&offset=1000000&dtype=float64&format=bin",
        "/v1/table?recipe=framework&d_model=2&seq_len=2097152&format=npy",
        "/v1/table?recipe=framework&d_model=8&seq_len=1048576&offset=7&format=npy",
        "/v1/table?scheme=rope&d_model=2&seq_len=2097152&format=npy",
        "/v1/similarity?d_model=64&seq_len=512&format=png",
        "/v1/verify?d_model=64&seq_len=512",
        "/v1/verify?scheme=rope&d_model=64&seq_len=256",
        "/v1/verify?scheme=rope&d_model=64&seq_len=256&rotary_pairs=8",
        "/v1/verify?scheme=alibi&num_heads=4&seq_len=128",
        "/v1/verify?scheme=t5&seq_len=256",
        "/v1/verify?scheme=sinusoidal2d&d_model=64&grid=16,16",
        "/v1/verify?scheme=binary&d_model=32&seq_len=256",
    ],
)
def test_no_other_operation_allocates_more_than_it_reserved(tracing: None, url: str) -> None:
    [(_, status, peak, reserved)] = _measure([url], {"accept-encoding": "gzip"})
    assert status == 200
    assert 0 < peak <= reserved, f"measured {peak} > declared {reserved}"
