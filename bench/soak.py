"""`make soak`: a bounded mixed load against a live server with a small cache.

Valid requests of every endpoint and scheme with random parameters (most of them distinct, so
the cache keeps evicting), invalid ones, oversized ones and oversized bodies, from a few
concurrent clients on loopback, for a fixed time and at most a fixed count. Reports what was
served, errors by status, latency and the server's RSS over time. Passes only with no 5xx, no
connection error and an RSS that stays flat once the cache is full.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

CACHE_MIB = 16
# A small cache that keeps evicting, and a body limit the oversized bodies pass.
SERVER_ENV = {"POSENC_CACHE_BYTES": str(CACHE_MIB * 2**20), "POSENC_MAX_BODY_BYTES": str(2**20)}
WORKERS = 6
MAX_REQUESTS = 200_000
# RSS may still grow this much in the second half of the run, once the cache is full.
FLAT_MIB = 24.0


@dataclass
class SoakReport:
    seconds: float
    statuses: Counter[int] = field(default_factory=Counter)
    connection_errors: int = 0
    latencies: list[float] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    @property
    def rss_growth_late(self) -> float:
        late = [mib for t, mib in self.rss if t >= self.seconds / 2]
        return max(late) - min(late) if len(late) >= 2 else 0.0

    @property
    def passed(self) -> bool:
        return (
            self.server_errors == 0
            and self.connection_errors == 0
            and (self.rss_growth_late <= FLAT_MIB)
        )

    def summary(self) -> str:
        q = statistics.quantiles(self.latencies, n=100) if len(self.latencies) > 1 else [0] * 99
        lines = [
            f"requests served: {sum(self.statuses.values())} in {self.seconds:.0f} s",
            "by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items())),
            f"connection errors: {self.connection_errors}",
            f"latency p50 {q[49] * 1e3:.1f} ms, p99 {q[98] * 1e3:.1f} ms",
            "RSS MiB over time: " + " ".join(f"{t:.0f}s:{m:.0f}" for t, m in self.rss),
            f"RSS growth in the second half: {self.rss_growth_late:.1f} MiB (allowed {FLAT_MIB})",
            f"verdict: {'PASS' if self.passed else 'FAIL'}",
        ]
        return "\n".join(lines)


def _request(rng: random.Random) -> tuple[str, str, dict[str, object]]:
    """(method, path with query, httpx keyword arguments) of one random request."""
    kind = rng.random()
    offset = rng.randrange(0, 2**31 - 5000)
    if kind < 0.45:
        scheme = rng.choice(
            [
                f"d_model={rng.randrange(1, 300)}",
                f"scheme=rope&d_model={2 * rng.randrange(1, 100)}",
                f"scheme=alibi&num_heads={rng.randrange(1, 12)}",
                "scheme=t5",
                f"scheme=binary&d_model={rng.randrange(1, 40)}",
            ]
        )
        fmt = rng.choice(["json", "bin", "npy", "csv", "plotly", "png"])
        n = rng.randrange(1, 120)
        return "GET", f"/v1/table?{scheme}&seq_len={n}&offset={offset}&format={fmt}", {}
    if kind < 0.6:
        positions = ",".join(str(rng.randrange(0, 2**31)) for _ in range(rng.randrange(1, 50)))
        return "GET", f"/v1/encode?d_model={rng.randrange(1, 512)}&positions={positions}", {}
    if kind < 0.7:
        return "GET", f"/v1/similarity?d_model=64&seq_len={rng.randrange(2, 200)}", {}
    if kind < 0.75:
        return "GET", f"/v1/verify?d_model={rng.randrange(2, 64)}&seq_len=32&offset={offset}", {}
    if kind < 0.85:
        bad = rng.choice(
            [
                "d_model=0&seq_len=3",
                "d_model=4&seq_len=abc",
                "d_model=4&seq_len=3&base=nan",
                "d_model=4&seq_len=3&layout=spiral",
                "scheme=nope",
            ]
        )
        return "GET", f"/v1/table?{bad}", {}
    if kind < 0.95:
        return "GET", "/v1/table?d_model=65536&seq_len=100000&format=bin", {}
    return (
        "POST",
        "/v1/encode",
        {
            "content": b"[" + b"0," * 600_000 + b"0]",
            "headers": {"Content-Type": "application/json"},
        },
    )


async def run(url: str, pid: int, seconds: float, seed: int = 0) -> SoakReport:
    report = SoakReport(seconds)
    deadline = time.monotonic() + seconds
    begun = time.monotonic()

    async def client_loop(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            while time.monotonic() < deadline and len(report.latencies) < MAX_REQUESTS:
                method, path, kwargs = _request(rng)
                start = time.perf_counter()
                try:
                    response = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
                except httpx.TransportError:
                    report.connection_errors += 1
                    continue
                report.latencies.append(time.perf_counter() - start)
                report.statuses[response.status_code] += 1

    async def watch_memory() -> None:
        while time.monotonic() < deadline:
            report.rss.append((time.monotonic() - begun, rss_mib(pid)))
            await asyncio.sleep(max(seconds / 20, 0.5))

    await asyncio.gather(watch_memory(), *(client_loop(i) for i in range(WORKERS)))
    return report


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=240.0)
    seconds = min(parser.parse_args().seconds, 300.0)
    from tests.live.conftest import start_server, stop_server

    server = start_server(SERVER_ENV)
    try:
        report = asyncio.run(run(server.url, server.process.pid, seconds))
    finally:
        stop_server(server)
    print(report.summary())
    sys.exit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
