"""Issue 25: cold answers as a client sees them, beside the recipe and the same bytes replayed.

For each of the issue's tables, over HTTP against a real uvicorn, fetched by a client as fast
as the socket (:class:`Client`), interleaved so that a burst of load on a shared machine hits
every kind alike:

- **cold, new offset**: a table nobody asked for before (neither the array cache nor the replay
  has it), the frequencies of its base cached;
- **cold, new base**: a new offset *and* a base nobody asked for, so the frequencies and twiddles
  are computed too;
- **replay**: the same URL again, answered from the replay cache (what a cached answer costs);
- **transfer**: as many pre-built bytes from a FastAPI app (``bench.baselines:hello``).

The bound of the issue is ``recipe / divisor + 1.2 × transfer`` (divisor 2 for the sinusoid, 1.5
for rope): the float32 recipe computed in this process, the transfer over the same loopback.
Each kind reports its best and its median of ``REPEATS``; the verdict reads the best, as every
other row of the benchmark does, and the median says how far a busy machine moves it. Every
size is measured once the service's cache has turned over (:func:`turnover`): as in a service
that has answered for a while, each new table is written into the pages of one let go
(``posenc.pages``), and the page faults per answer say whether it was. Where a table's time
goes: the core computing it into fresh memory in this process (what a table costs before the
cache has turned over), the rest of the app (the same request through the ASGI app in this
process, turned over too) and the wire (HTTP minus both).
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.run import asgi_seconds, best_seconds, float32_recipe, rope_recipe

TABLES = (
    ("sinusoidal", 2048, 512, 2.0),
    ("sinusoidal", 8192, 1024, 2.0),
    ("sinusoidal", 4096, 4096, 2.0),
    ("rope", 8192, 128, 1.5),
    ("rope", 32768, 128, 1.5),
)
REPEATS = 9
CACHE_BYTES = 256 * 2**20


class Client:
    """HTTP/1.1 GETs over one kept-alive connection per server, each body received into the
    same buffer: a client as fast as the socket, like the Go or Rust server that fetches a table.
    (httpx took 85-130 ms for 32 MiB that curl and this read in 30 ms: timed through it, the
    transfer was the client's own.)"""

    def __init__(self) -> None:
        self.connections: dict[str, socket.socket] = {}
        self.buffer = bytearray()  # reused: the client's own fresh pages are not the server's

    def get(self, url: str) -> tuple[float, int]:
        """Seconds from sending the request to the last byte of the body, and its length."""
        parts = urlsplit(url)
        connection = self.connections.get(parts.netloc)
        if connection is None:
            connection = socket.create_connection((parts.hostname, parts.port))
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections[parts.netloc] = connection
        target = f"{parts.path}?{parts.query}" if parts.query else parts.path
        start = time.perf_counter()
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
        received = bytearray()
        while b"\r\n\r\n" not in received:
            chunk = connection.recv(1 << 16)
            if not chunk:
                raise ConnectionError(f"{url}: the server closed the connection")
            received += chunk
        head, _, rest = bytes(received).partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        headers = dict(line.lower().split(b":", 1) for line in lines[1:])
        length = int(headers[b"content-length"])
        if len(self.buffer) < length:
            self.buffer = bytearray(length)
        view = memoryview(self.buffer)
        view[: len(rest)] = rest
        got = len(rest)
        while got < length:
            count = connection.recv_into(view[got:], length - got)
            if not count:
                raise ConnectionError(f"{url}: the body ended after {got} of {length} bytes")
            got += count
        seconds = time.perf_counter() - start
        if status != 200:
            raise RuntimeError(f"{url}: {status} {bytes(view[: min(got, 300)])!r}")
        return seconds, length

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def _ms(times: list[float]) -> str:
    return f"{min(times) * 1e3:.1f} ms (median {statistics.median(times) * 1e3:.1f})"


def fresh_compute(
    core: Callable[[int, float], Any], repeats: int
) -> tuple[list[float], list[float]]:
    """The core computing tables into fresh memory, each kept as the cache keeps it: a new
    offset with a cached base, then a new offset and a new base."""
    kept: list[Any] = []
    offsets, bases = itertools.count(5000, 11), itertools.count(1)
    same: list[float] = []
    new: list[float] = []
    core(next(offsets), 10000.0)
    for _ in range(repeats):
        for times, base in ((same, 10000.0), (new, 30000.0 + next(bases) / 4)):
            start = time.perf_counter()
            kept.append(core(next(offsets), base))
            times.append(time.perf_counter() - start)
            # As the service's cache (256 MiB by default): older tables are let go past it.
            # (It kept 8: a 4 MiB table then reused the memory of the ninth before it, and the
            # pages a cold answer faults in, ~0.4 ms per MiB here, went uncounted.)
            while sum(table.nbytes for table in kept) > CACHE_BYTES:
                del kept[0]
    return same, new


def turnover(capacity: int, size: int) -> int:
    """Distinct tables of ``size`` bytes that turn a cache of ``capacity`` over twice (each is
    kept as an array and as a replayed body): a service that has been answering for a while,
    whose cache is full and lets a table go for every new one, as it is once its first minutes
    are over. Before that, a cold table's pages are new ones (``posenc.pages``)."""
    return 2 + math.ceil(4 * capacity / size)


def cache_capacity(posenc: str) -> int:
    """The serving process's cache bound, as its ``/metrics`` says."""
    metrics = httpx.get(f"{posenc}/metrics", timeout=30).text
    return next(
        int(float(line.split()[-1]))
        for line in metrics.splitlines()
        if line.startswith("posenc_cache_capacity_bytes ")
    )


def cold_answers(row: Callable[[str, str, str, str], None], posenc: str, hello: str) -> None:
    from app.main import create_app
    from app.settings import Settings
    from posenc.schemes.rope import maths as rope
    from posenc.schemes.rope.params import RopeParams
    from posenc.schemes.sinusoidal import maths as sinusoidal
    from posenc.schemes.sinusoidal.params import SinusoidalParams

    row("25. machine while measuring", load_average(), "-", "-")
    app = create_app(Settings(log_level="warning"))
    offsets = itertools.count(1000, 7)
    bases = itertools.count(1)
    client = Client()
    try:
        for scheme, n, d, divisor in TABLES:
            path = f"/v1/{scheme}/table"
            query = f"d_model={d}&seq_len={n}"

            def url(
                fmt: str, base: float | None = None, path: str = path, query: str = query
            ) -> str:
                chosen = f"&base={base}" if base is not None else ""
                return f"{posenc}{path}?{query}&format={fmt}&offset={next(offsets)}{chosen}"

            _, size = client.get(url("bin"))  # loops loaded, as in a warm service
            client.get(f"{hello}/bytes/{size}")
            for _ in range(turnover(cache_capacity(posenc), size)):
                client.get(url("bin"))
            times: dict[str, list[float]] = {
                k: [] for k in ("offset", "base", "npy", "replay", "transfer")
            }
            for _ in range(REPEATS):
                times["offset"].append(client.get(url("bin"))[0])
                fresh = url("bin", 20000.0 + next(bases) / 4)
                times["base"].append(client.get(fresh)[0])
                times["replay"].append(client.get(fresh)[0])
                times["npy"].append(client.get(url("npy", 20000.0 + next(bases) / 4))[0])
                times["transfer"].append(client.get(f"{hello}/bytes/{size}")[0])
            if scheme == "sinusoidal":
                recipe, label = partial(float32_recipe, n, d), "sinusoid"

                def core(offset: int, base: float, n: int = n, d: int = d) -> Any:
                    params = SinusoidalParams(d_model=d, base=base)
                    return sinusoidal.table(params, n, offset, "float32")

            else:
                recipe, label = partial(rope_recipe, n, d), "rope cos_sin"

                def core(offset: int, base: float, n: int = n, d: int = d) -> Any:
                    return rope.table(RopeParams(d_model=d, base=base), n, offset, "float32")

            recipe_s = best_seconds(recipe)
            same, new = fresh_compute(core, REPEATS)
            asgi_seconds(  # turned over as the server was
                app,
                path,
                [
                    f"{query}&format=bin&offset={next(offsets)}&base={40000 + next(bases) / 4}"
                    for _ in range(turnover(app.state.cache.capacity, size))
                ],
            )
            in_app, faults = asgi_seconds(
                app,
                path,
                [
                    f"{query}&format=bin&offset={next(offsets)}&base={40000 + next(bases) / 4}"
                    for _ in range(REPEATS + 1)
                ],
            )
            transfer = min(times["transfer"])
            bound = recipe_s / divisor + 1.2 * transfer
            what = f"cold {label} {n}×{d} float32"
            basis = (
                f"recipe {recipe_s * 1e3:.1f}/{divisor:g} + 1.2 × transfer {transfer * 1e3:.1f}"
                f" = {bound * 1e3:.1f} ms"
            )
            for kind, label_ in (
                ("offset", "bin, new offset"),
                ("base", "bin, new base"),
                ("npy", "npy, new base"),
            ):
                best = min(times[kind])
                row(
                    f"25. {what}, {label_}, over HTTP",
                    _ms(times[kind]),
                    basis,
                    f"{best / bound:.2f}× the bound: {'met' if best <= bound else 'missed'}",
                )
            row(
                f"25. the same bytes replayed (cached) {n}×{d}",
                _ms(times["replay"]),
                f"transfer of {size / 2**20:.0f} MiB pre-built: {_ms(times['transfer'])}",
                f"{min(times['replay']) / transfer:.2f}× the transfer",
            )
            row(
                f"25. {what}, bin, new base, in process (the ASGI app, no socket)",
                f"{in_app * 1e3:.1f} ms",
                f"recipe {recipe_s * 1e3:.1f}/{divisor:g} = {recipe_s / divisor * 1e3:.1f} ms",
                f"{in_app / (recipe_s / divisor):.2f}× the bound: "
                + ("met" if in_app <= recipe_s / divisor else "missed"),
            )
            compute = min(new)
            row(
                f"   where a cold bin {n}×{d} with a new base goes",
                f"compute {compute * 1e3:.1f} (cached base {min(same) * 1e3:.1f}), "
                f"app {max(0.0, in_app - compute) * 1e3:.1f}, "
                f"wire {max(0.0, min(times['base']) - in_app) * 1e3:.1f} ms",
                f"core into fresh memory: {_ms(new)}",
                f"{faults} page faults per answer in the app",
            )
    finally:
        client.close()
    row("25. machine after measuring", load_average(), "-", "-")


def main() -> None:
    """``python -m bench.cold [--root DIR]``: these rows alone, as Markdown, with the service
    run from ``DIR`` (another checkout's code over HTTP; the in-process rows are this tree's)."""
    import argparse
    from pathlib import Path

    from bench.run import ROOT, server

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--root", type=Path, default=ROOT)
    root = parser.parse_args().root
    print("| goal | measured | baseline | verdict |\n| --- | --- | --- | --- |")

    def row(*cells: str) -> None:
        print(f"| {' | '.join(cells)} |", flush=True)

    with (
        server("--factory app.main:create_app", root=root) as (posenc, _),
        server("bench.baselines:hello") as (hello, _),
    ):
        cold_answers(row, posenc, hello)


if __name__ == "__main__":
    main()
