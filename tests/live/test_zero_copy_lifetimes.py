"""Zero-copy answers under stress: a large npy table read slowly while its cache entry is
evicted and other threads compute, verify and answer around it arrives as it was computed."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal.params import SinusoidalParams
from tests.live.conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

CACHE_BYTES = 4 * 2**20
D_MODEL, SEQ_LEN = 512, 1536  # 3 MiB of float32: cached, then evicted by the churn


@pytest.fixture(scope="module")
def small_cache() -> Iterator[LiveServer]:
    server = start_server({"POSENC_CACHE_BYTES": str(CACHE_BYTES), "POSENC_LOG_LEVEL": "warning"})
    yield server
    stop_server(server)


def _slow_get(server: LiveServer, target: str, pause_s: float) -> bytes:
    """GET ``target`` with a small receive buffer, reading 16 KiB at a time with a pause, so the
    server's transport waits on this client for seconds; returns the body."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(60)
        sock.connect((server.host, server.port))
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        received = bytearray()
        while chunk := sock.recv(16384):
            received += chunk
            time.sleep(pause_s)
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    assert len(body) == length
    return body


def _churn(server: LiveServer, stop: threading.Event, statuses: list[int]) -> None:
    """Tables that evict each other (and the slow one) and rope verifications, until stopped."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        offset = 0
        while not stop.is_set():
            offset += 1
            for url in (
                f"/v1/sinusoidal/table?d_model={D_MODEL}&seq_len={SEQ_LEN}&offset={offset}"
                "&dtype=float32&format=npy",
                f"/v1/rope/verify?d_model=64&seq_len=512&offset={offset}&dtype=float32",
                f"/v1/rope/table?d_model=128&seq_len=2048&offset={offset}&format=bin",
            ):
                statuses.append(client.get(url).status_code)


def test_a_table_read_slowly_arrives_as_computed_while_it_is_evicted_and_replayed(
    small_cache: LiveServer,
) -> None:
    target = (
        f"/v1/sinusoidal/table?d_model={D_MODEL}&seq_len={SEQ_LEN}&offset=0"
        "&dtype=float32&format=npy"
    )
    expected = sinusoidal.table(SinusoidalParams(d_model=D_MODEL), SEQ_LEN, 0, "float32")
    stop, statuses = threading.Event(), list[int]()
    churners = [
        threading.Thread(target=_churn, args=(small_cache, stop, statuses)) for _ in range(2)
    ]
    try:
        for churner in churners:
            churner.start()
        # The first is computed and sent from the cache's array; the second replayed from the
        # recorded pieces (a view of that array), both at ~3 MiB/s at most, while the churn
        # evicts what the cache holds several times over.
        bodies = [_slow_get(small_cache, target, pause_s=0.004) for _ in range(2)]
    finally:
        stop.set()
        for churner in churners:
            churner.join(timeout=120)
    for body in bodies:
        assert np.load(io.BytesIO(body)).tobytes() == expected.tobytes()
    assert len(statuses) > 10 and set(statuses) == {200}, sorted(set(statuses))
    assert small_cache.process.poll() is None
    stats = httpx.get(f"{small_cache.url}/metrics").text
    misses = next(
        float(line.split()[1])
        for line in stats.splitlines()
        if line.startswith("posenc_cache_misses_total")
    )
    assert misses > CACHE_BYTES / (D_MODEL * SEQ_LEN * 4) * 2  # the churn filled it over and over


def test_a_rope_table_sent_while_it_is_verified_is_the_one_computed(
    small_cache: LiveServer,
) -> None:
    # The same cached array read by a verification in a worker thread and sent zero-copy.
    params = RopeParams(d_model=256)
    expected = rope.table(params, 1024, 7, "float32", "cos_sin")
    query = "d_model=256&seq_len=1024&offset=7&dtype=float32"
    results: list[bytes | int] = []

    def fetch(path: str) -> None:
        answer = httpx.get(f"{small_cache.url}{path}", timeout=60)
        results.append(answer.content if path.endswith("npy") else answer.status_code)

    threads = [
        threading.Thread(target=fetch, args=(f"/v1/rope/{endpoint}?{query}{fmt}",))
        for _ in range(4)
        for endpoint, fmt in (("table", "&format=npy"), ("verify", ""))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    bodies = [result for result in results if isinstance(result, bytes)]
    assert len(bodies) == 4 and [r for r in results if isinstance(r, int)] == [200] * 4
    for body in bodies:
        assert np.load(io.BytesIO(body)).tobytes() == expected.tobytes()
