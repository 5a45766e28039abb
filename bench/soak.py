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
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.live.bounded import SLACK_BYTES, memory, reset_peak

CACHE_MIB = 16
MEMORY_MIB = 128
# A small cache that keeps evicting, a budget the memory promise is checked against (the load's
# largest answers reserve a few MiB each, so it never has to queue), and a body limit the
# oversized bodies pass.
SERVER_ENV = {
    "POSENC_CACHE_BYTES": str(CACHE_MIB * 2**20),
    "POSENC_MEMORY_BYTES": str(MEMORY_MIB * 2**20),
    "POSENC_MAX_BODY_BYTES": str(2**20),
}
WORKERS = 6
MAX_REQUESTS = 200_000
# The load pauses this often: with nothing in flight, what the server holds is what it keeps.
ROUND_S = 1.0
# How much what the server keeps beside its cache may differ between the two halves of the run
# (after its first quarter, where first uses set things up) before it is called a leak. What
# moves it without a leak is the cache's composition: an array entry's key and objects are held
# and not counted (~0.6 KiB each), a bin or npy replay counts the array it shares with the
# array's entry; measured, the medians of the halves differ by at most 0.4 MiB and the whole
# band is 1.4-2.1 MiB wide over 60 s of this load (it falls while the cache fills). The halves'
# medians are about a third of the requests apart: `make soak` (~6000 requests under tracing)
# tells a leak of 1 KiB per request, the 20 s test (300-600 on a loaded 2-core machine) one of
# ~15 KiB, about what the CI failure's growth would have been per request had it been a leak.
KEPT_GROWTH_BYTES = 2 * 2**20


@dataclass(frozen=True)
class Sample:
    """The server between two rounds, nothing in flight. Bytes; ``traced`` is None when the
    server was not started by bench/traced.py."""

    t: float
    requests: int
    rss: int
    peak: int  # VmHWM: the most resident at any moment so far, in a round or between
    cache: int
    cache_entries: int
    series: int  # of posenc_requests_total: label sets are memory too
    traced: int | None
    tracemalloc: int

    @property
    def kept(self) -> int | None:
        """What the server holds that its cache does not count: flat, or it leaks."""
        return None if self.traced is None else self.traced - self.cache


@dataclass
class SoakReport:
    seconds: float
    statuses: Counter[int] = field(default_factory=Counter)
    connection_errors: int = 0
    latencies: list[float] = field(default_factory=list)
    idle: Sample | None = None
    samples: list[Sample] = field(default_factory=list)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    @property
    def rss(self) -> list[tuple[float, float]]:
        return [(s.t, s.rss / 2**20) for s in self.samples]

    @property
    def kept_growth(self) -> float | None:
        """Bytes: the median of what the server keeps beside its cache over the second half of
        the run (after its first quarter) minus that over the first half; None untraced."""
        kept = [s.kept for s in self.samples[len(self.samples) // 4 :] if s.kept is not None]
        if len(kept) < 4:
            return None
        half = len(kept) // 2
        return statistics.median(kept[half:]) - statistics.median(kept[:half])

    @property
    def peak(self) -> int:
        return max((s.peak for s in self.samples), default=0)

    @property
    def peak_bound(self) -> int:
        """The memory promise: idle + budget + cache + slack, and what tracing itself added."""
        idle = self.idle.rss if self.idle else 0
        tracing = max((s.tracemalloc for s in self.samples), default=0)
        tracing -= self.idle.tracemalloc if self.idle else 0
        return idle + (MEMORY_MIB + CACHE_MIB) * 2**20 + SLACK_BYTES + tracing

    @property
    def rss_growth_late(self) -> float:
        """MiB the resident set grew over the second half: the allocator settling, or a leak
        that tracemalloc cannot see (then the peak bound catches it). Reported, not judged."""
        late = [s.rss for s in self.samples if s.t >= self.seconds / 2]
        return (max(late) - min(late)) / 2**20 if len(late) >= 2 else 0.0

    @property
    def passed(self) -> bool:
        growth = self.kept_growth
        return (
            self.server_errors == 0
            and self.connection_errors == 0
            and (growth is None or growth <= KEPT_GROWTH_BYTES)
            and self.peak <= self.peak_bound
        )

    def summary(self) -> str:
        q = statistics.quantiles(self.latencies, n=100) if len(self.latencies) > 1 else [0] * 99
        lines = [
            f"requests served: {sum(self.statuses.values())} in {self.seconds:.0f} s",
            "by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items())),
            f"connection errors: {self.connection_errors}",
            f"latency p50 {q[49] * 1e3:.1f} ms, p99 {q[98] * 1e3:.1f} ms",
            "MiB after each round (t: RSS peak cache kept): "
            + " ".join(
                f"{s.t:.0f}s:{s.rss / 2**20:.0f}/{s.peak / 2**20:.0f}/{s.cache / 2**20:.1f}"
                + (f"/{s.kept / 2**20:.2f}" if s.kept is not None else "")
                for s in self.samples
            ),
            f"kept beside the cache, second half minus first: {_mib(self.kept_growth)} MiB "
            f"(allowed {KEPT_GROWTH_BYTES / 2**20:.0f})",
            f"peak RSS {self.peak / 2**20:.0f} MiB (bound {self.peak_bound / 2**20:.0f}: idle "
            f"{(self.idle.rss if self.idle else 0) / 2**20:.0f} + budget {MEMORY_MIB} + cache "
            f"{CACHE_MIB} + slack {SLACK_BYTES / 2**20:.0f} + tracing)",
            f"RSS growth in the second half: {self.rss_growth_late:.1f} MiB (not judged)",
            f"verdict: {'PASS' if self.passed else 'FAIL'}",
        ]
        return "\n".join(lines)


def _mib(nbytes: float | None) -> str:
    return "n/a (not traced)" if nbytes is None else f"{nbytes / 2**20:+.2f}"


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


async def run(
    url: str, pid: int, seconds: float, seed: int = 0, traced: Path | None = None
) -> SoakReport:
    """The load for ``seconds`` in rounds of about ``ROUND_S``, a :class:`Sample` of the server
    (process ``pid``) before the first and after each; ``traced``: the report file of a server
    started by bench/traced.py, whose live bytes each sample then includes."""
    report = SoakReport(seconds)
    begun = time.monotonic()
    rounds = max(1, round(seconds / ROUND_S))
    rngs = [random.Random(seed * 1000 + index) for index in range(WORKERS)]

    async def client_loop(client: httpx.AsyncClient, rng: random.Random, until: float) -> None:
        while time.monotonic() < until and len(report.latencies) < MAX_REQUESTS:
            method, path, kwargs = _request(rng)
            start = time.perf_counter()
            try:
                response = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
            except httpx.TransportError:
                report.connection_errors += 1
                continue
            report.latencies.append(time.perf_counter() - start)
            report.statuses[response.status_code] += 1

    async with httpx.AsyncClient(base_url=url, timeout=30) as probe:
        report.idle = await _sample(probe, pid, begun, 0, traced)
        reset_peak(pid)
        clients = [httpx.AsyncClient(base_url=url, timeout=30) for _ in range(WORKERS)]
        try:
            for index in range(rounds):
                until = begun + seconds * (index + 1) / rounds
                await asyncio.gather(
                    *(client_loop(c, r, until) for c, r in zip(clients, rngs, strict=True))
                )
                report.samples.append(
                    await _sample(probe, pid, begun, len(report.latencies), traced)
                )
        finally:
            for client in clients:
                await client.aclose()
    return report


async def _sample(
    probe: httpx.AsyncClient, pid: int, begun: float, requests: int, traced: Path | None
) -> Sample:
    metrics = (await probe.get("/metrics")).text
    figures = dict(line.split(" ", 1) for line in metrics.splitlines() if line[:1] != "#")
    series = sum(line.startswith("posenc_requests_total{") for line in metrics.splitlines())
    live = await _ask_traced(pid, traced) if traced is not None else None
    status = memory(pid)
    return Sample(
        t=time.monotonic() - begun,
        requests=requests,
        rss=status["VmRSS"],
        peak=status["VmHWM"],
        cache=int(float(figures["posenc_cache_bytes"])),
        cache_entries=int(float(figures["posenc_cache_entries"])),
        series=series,
        traced=live["traced"] if live else None,
        tracemalloc=live["tracemalloc"] if live else 0,
    )


async def _ask_traced(pid: int, report: Path) -> dict[str, int]:
    """SIGUSR1 to a bench/traced.py server, and the line it appends to ``report``."""
    told = report.read_text().count("\n") if report.exists() else 0
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = report.read_text().splitlines() if report.exists() else []
        if len(lines) > told:
            answer: dict[str, int] = json.loads(lines[told])
            return answer
        await asyncio.sleep(0.01)
    raise TimeoutError(f"the traced server {pid} did not report within 30 s")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def soak(seconds: float, seed: int = 0) -> SoakReport:
    """The load against a server of its own, started as `make run` starts one (its allocator
    settings included) but through bench/traced.py, so that its live bytes are known."""
    from tests.live.conftest import start_server, stop_server

    with tempfile.TemporaryDirectory() as folder:
        traced = Path(folder) / "traced.jsonl"
        server = start_server(SERVER_ENV, launcher=("-m", "bench.traced", str(traced)))
        try:
            return asyncio.run(run(server.url, server.pid, seconds, seed, traced))
        finally:
            stop_server(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--url", help="load a server already running (loopback only) instead")
    parser.add_argument("--pid", type=int, help="that server's process, for its memory")
    args = parser.parse_args()
    seconds = min(args.seconds, 600.0)
    if args.url:
        if not args.url.startswith(("http://127.0.0.1:", "http://localhost:")) or not args.pid:
            parser.error("--url must be a loopback address, and --pid its process")
        report = asyncio.run(run(args.url, args.pid, seconds))
    else:
        report = soak(seconds)
    print(report.summary())
    sys.exit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
