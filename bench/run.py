"""`make bench` (`python -m bench.run`): posenc against its baselines, in one run.

Issue 15 first: the core against its recipes in this process (goals 1, 3, 4); then issue 25's
cold answers as a client sees them (bench/cold.py: new offsets and new bases over HTTP, beside
the recipe, the transfer of as many pre-built bytes and the replay of the same answer), which
replace issue 15's goals 0 and 2; start-up (goal 5). Then issue 4's rows: posenc, a hello-world
app and the tutorial-style service (bench/baselines.py) as real uvicorn processes on loopback,
driven by wrk (or, without it, a bounded async httpx loop). Prints one table of goals with their
ratios, and writes it to bench/results-<date>.md. ``--core``: the in-process rows only;
``--cold``: those and the cold answers.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.applied import applied
from bench.configs import config_answers
from bench.recipes import runtime_recipes
from bench.soak import rss_mib

ROOT = Path(__file__).resolve().parent.parent
DURATION_S = 5
CONNECTIONS = 16


@dataclass
class Load:
    rps: float
    p50_ms: float
    p99_ms: float
    size: int

    @property
    def gbps(self) -> float:
        return self.rps * self.size / 1e9


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(
    target: str, env: dict[str, str] | None = None, root: Path = ROOT
) -> Iterator[tuple[str, int]]:
    """``uvicorn target`` on a free loopback port, run from ``root`` (another checkout serves
    its own code), until the block ends."""
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "uvicorn",
        *target.split(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "POSENC_LOG_LEVEL": "warning", **(env or {})}
    process = subprocess.Popen(args, cwd=root, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(url + "/docs", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)


def load(url: str, connections: int = CONNECTIONS) -> Load:
    size = len(httpx.get(url, timeout=60).content)
    if shutil.which("wrk"):
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{DURATION_S}s", "--latency", url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
        return Load(rps, _wrk_ms(out, "50%"), _wrk_ms(out, "99%"), size)
    return asyncio.run(_httpx_load(url, connections, size))


def _wrk_ms(out: str, label: str) -> float:
    value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


async def _httpx_load(url: str, connections: int, size: int) -> Load:
    latencies: list[float] = []
    deadline = time.perf_counter() + DURATION_S
    limits = httpx.Limits(max_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def worker() -> None:
            while time.perf_counter() < deadline and len(latencies) < 1_000_000:
                start = time.perf_counter()
                await client.get(url)
                latencies.append(time.perf_counter() - start)

        begun = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - begun
    quantiles = statistics.quantiles(latencies, n=100)
    return Load(len(latencies) / elapsed, quantiles[49] * 1e3, quantiles[98] * 1e3, size)


def best_seconds(work: Callable[[], object], repeats: int = 3) -> float:
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def tutorial_recipe(n: int, d: int) -> np.ndarray:
    position = np.arange(n, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(position * div_term), np.cos(position * div_term)
    return pe.astype(np.float32)


def float32_recipe(n: int, d: int) -> np.ndarray:
    position = np.arange(n, dtype=np.float32)[:, None]
    div_term = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / d))
    pe = np.empty((n, d), np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(position * div_term), np.cos(position * div_term)
    return pe


def float64_recipe(n: int, d: int) -> np.ndarray:
    position = np.arange(n, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = np.empty((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(position * div_term), np.cos(position * div_term)
    return pe


def rope_recipe(n: int, d: int) -> np.ndarray:
    """transformers' rotary cos/sin: float32 angles, (n, d) cos and sin of ``cat(f, f)``."""
    inv_freq = (1.0 / 10000 ** (np.arange(0, d, 2, dtype=np.float32) / d)).astype(np.float32)
    freqs = np.arange(n, dtype=np.float32)[:, None] * inv_freq
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.stack([np.cos(emb), np.sin(emb)])


def core_table(row: Callable[[str, str, str, str], None]) -> None:
    """Issue 15's core goals, each against its recipe in the same run (best of 3, a fresh
    output every time on both sides; frequencies cached, as for a service's second table)."""
    import tracemalloc

    from posenc.schemes.rope import maths as rope
    from posenc.schemes.rope.params import RopeParams
    from posenc.schemes.sinusoidal import maths as sinusoidal
    from posenc.schemes.sinusoidal.params import SinusoidalParams

    def ratio(ours: Callable[[], object], recipe: Callable[[], object]) -> tuple[float, float]:
        return best_seconds(ours), best_seconds(recipe)

    for n, d in ((2048, 512), (8192, 1024), (4096, 4096)):
        for layout in ("interleaved", "split"):
            params = SinusoidalParams(d_model=d, layout=layout)
            ours, f32 = ratio(
                partial(sinusoidal.table, params, n, 0, "float32"), partial(float32_recipe, n, d)
            )
            row(
                f"1. cold float32 sinusoid {n}×{d} {layout}",
                f"{n * d * 4 / ours / 1e9:.2f} GB/s ({ours * 1e3:.1f} ms)",
                f"float32 recipe {n * d * 4 / f32 / 1e9:.2f} GB/s ({f32 * 1e3:.1f} ms)",
                _ratio(f32 / ours, 2),
            )
        params = SinusoidalParams(d_model=d)
        ours, f64 = ratio(
            partial(sinusoidal.table, params, n, 0, "float64"), partial(float64_recipe, n, d)
        )
        row(
            f"1. cold float64 sinusoid {n}×{d}",
            f"{ours * 1e3:.1f} ms",
            f"float64 recipe {f64 * 1e3:.1f} ms",
            _ratio(f64 / ours, 1),
        )
    for n in (8192, 32768):
        params_r = RopeParams(d_model=128)
        ours, recipe = ratio(
            partial(rope.table, params_r, n, 0, "float32"), partial(rope_recipe, n, 128)
        )
        row(
            f"1. cold rope cos_sin {n}×128 float32",
            f"{ours * 1e3:.2f} ms",
            f"float32 recipe {recipe * 1e3:.2f} ms",
            _ratio(recipe / ours, 1.5),
        )
    for n, d in ((8192, 1024), (4096, 4096)):
        params = SinusoidalParams(d_model=d)
        one, two = ratio(
            partial(sinusoidal.table, params, n, 0, "float32", 1),
            partial(sinusoidal.table, params, n, 0, "float32", 2),
        )
        row(
            f"4. float32 sinusoid {n}×{d}, threads=2 vs 1",
            f"2 threads {two * 1e3:.1f} ms",
            f"1 thread {one * 1e3:.1f} ms",
            f"{one / two:.2f}× faster with 2; the service: one thread per request",
        )
    for n, d in ((2048, 512), (8192, 1024)):
        params = SinusoidalParams(d_model=d)
        tracemalloc.start()
        out = sinusoidal.table(params, n, 10**6, "float32")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        cost = sinusoidal.table_cost(params, n, "float32")
        seconds = best_seconds(partial(sinusoidal.table, params, n, 10**6, "float32"))
        row(
            f"3. peak memory, float32 sinusoid {n}×{d}",
            f"{peak / out.nbytes:.3f}× output (tracemalloc)",
            f"cost model {cost.bytes / out.nbytes:.3f}×",
            f"goal ≤ 1.25×; {seconds * 1e9 / cost.work:.2f} ns per work unit (≤ 1)",
        )


def fetch_seconds(client: httpx.Client, url: str) -> tuple[float, int]:
    start = time.perf_counter()
    response = client.get(url)
    seconds = time.perf_counter() - start
    response.raise_for_status()
    return seconds, len(response.content)


def asgi_seconds(app: Any, path: str, queries: list[str]) -> tuple[float, int]:
    """GETs through the app in this process, one after the other in one event loop, every
    body message dropped: the whole serving stack (middleware, validation, admission, compute,
    cache, body) without a socket. The fastest, and the median page faults of one."""
    results = []

    async def all_of_them() -> None:
        await _asgi_get(app, path, queries[0])  # the first answer of a fresh app pays its start
        for query in queries[1:]:
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            await _asgi_get(app, path, query)
            seconds = time.perf_counter() - start
            results.append((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))

    asyncio.run(all_of_them())
    return min(seconds for seconds, _ in results), int(statistics.median(f for _, f in results))


async def _asgi_get(app: Any, path: str, query: str) -> None:
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if requested:
            await asyncio.Event().wait()
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"bench")],
        "client": ("127.0.0.1", 1),
        "server": ("bench", 80),
    }
    await app(scope, receive, send)
    assert statuses == [200], statuses


@dataclass
class Started:
    pid: int  # of the server process, as this machine sees it
    stop: Callable[[], None]


def readyz_seconds(start: Callable[[int], Started]) -> tuple[float, float]:
    """From ``start(port)`` to the first 200 on /readyz (polled every 5 ms), in wall-clock
    seconds and in the server's CPU seconds (steady however busy the machine); then stopped."""
    port = free_port()
    begun = time.perf_counter()
    started = start(port)
    try:
        with httpx.Client(timeout=1) as client:
            while time.perf_counter() - begun < 60:
                try:
                    if client.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                        return time.perf_counter() - begun, cpu_seconds(started.pid)
                except httpx.TransportError:
                    pass
                time.sleep(0.005)
        raise RuntimeError("no 200 on /readyz within 60 s")
    finally:
        started.stop()


def cpu_seconds(pid: int) -> float:
    # utime, stime, cutime, cstime: fields 14–17 of proc(5), the 12th–15th after the ")".
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def start_process(port: int, env: dict[str, str] | None = None) -> Started:
    args = [sys.executable, "-m", "uvicorn", "--factory", "app.main:create_app"]
    args += ["--host", "127.0.0.1", "--port", str(port), "--no-access-log"]
    process = subprocess.Popen(
        [*args, "--log-level", "warning"],
        cwd=ROOT,
        env={**os.environ, "POSENC_LOG_LEVEL": "warning", **(env or {})},
    )

    def stop() -> None:
        process.terminate()
        process.wait(timeout=10)

    return Started(process.pid, stop)


def start_with_empty_numba_cache(root: str, port: int) -> Started:
    import tempfile

    return start_process(port, {"NUMBA_CACHE_DIR": tempfile.mkdtemp(dir=root)})


def start_container(image: str, port: int) -> Started:
    name = f"posenc-bench-{port}"
    options = ["--rm", "--name", name, "--network", "host", "-e", f"POSENC_PORT={port}"]
    subprocess.run(
        ["docker", "run", "-d", *options, "-e", "POSENC_LOG_LEVEL=warning", image],
        check=True,
        capture_output=True,
    )
    inspect = ["docker", "inspect", "-f", "{{.State.Pid}}", name]
    pid = int(subprocess.run(inspect, capture_output=True, text=True, check=True).stdout)

    def stop() -> None:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)

    return Started(pid, stop)


def startup(row: Callable[[str, str, str, str], None]) -> None:
    """Issue 15's goal 5: start → first 200 on /readyz, for the process (with the compiled
    loops cached, as the image ships them, and without) and for the container if Docker runs
    here. Median of three, wall clock and the server's CPU time."""

    def median_of_3(start: Callable[[int], Started]) -> tuple[float, float, float]:
        runs = [readyz_seconds(start) for _ in range(3)]
        walls = [wall for wall, _ in runs]
        return statistics.median(walls), max(walls), statistics.median(c for _, c in runs)

    def measured(wall: float, worst: float, cpu: float) -> str:
        return f"{wall:.2f} s (worst {worst:.2f}), CPU {cpu:.2f} s"

    warm = median_of_3(start_process)
    row(
        "5. process start → first 200 on /readyz",
        measured(*warm),
        "uvicorn --factory app.main:create_app, numba cache filled",
        f"goal ≤ 2 s: {'met' if warm[0] <= 2 else 'missed'}",
    )
    import tempfile

    with tempfile.TemporaryDirectory() as root:  # a directory of its own for every start
        cold = median_of_3(partial(start_with_empty_numba_cache, root))
    row(
        "5. the same, numba cache empty",
        measured(*cold),
        f"cache filled: CPU {warm[2]:.2f} s",
        f"the pre-built cache saves {cold[2] - warm[2]:.2f} CPU s",
    )
    image, reason = container_image()
    if image is None:
        row("5. container start → first 200 on /readyz", "not measured", reason, "-")
        return
    container = median_of_3(partial(start_container, image))
    row(
        "5. container start → first 200 on /readyz",
        measured(*container),
        f"docker run -d {image}, host network",
        f"goal ≤ 2 s: {'met' if container[0] <= 2 else 'missed'}",
    )


def container_image() -> tuple[str | None, str]:
    """The image of this checkout, built as the system tests build it, or why there is none."""
    if shutil.which("docker") is None:
        return None, "no docker CLI here"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return None, "no Docker engine (scripts/docker-test-env.sh starts one)"
    from tests.system.dockerd import build_image

    try:
        return build_image(), ""
    except (RuntimeError, subprocess.SubprocessError) as failure:
        return None, f"image build failed: {str(failure)[-200:]}"


def _ratio(ratio: float, goal: float) -> str:
    return f"{ratio:.2f}× (goal ≥ {goal:g}×): {'met' if ratio >= goal else 'missed'}"


def max_ulp_near_the_top(d: int) -> float:
    """Sampled float32 values of a table ending at 2^31 − 1 against a 50-digit evaluation."""
    from posenc import SinusoidalParams, table
    from posenc.verify import decimal_sin_cos, ulp_error

    n = 4096
    offset = 2**31 - n
    served = table(SinusoidalParams(d_model=d), n, offset, "float32")
    rng = np.random.default_rng(1)
    rows, columns = rng.integers(0, n, 400), rng.integers(0, d, 400)
    exact = []
    with localcontext(prec=60):
        log_base = Decimal(10000).ln()
        for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
            omega = (-Decimal(2 * (column // 2)) / d * log_base).exp()
            sin, cos = decimal_sin_cos((offset + row) * omega)
            exact.append(cos if column % 2 else sin)
    return ulp_error(served[rows, columns], exact)


def fastapi_default_json_seconds(array: np.ndarray) -> float:
    from fastapi.encoders import jsonable_encoder

    def default_path() -> bytes:
        content = jsonable_encoder({"data": array.tolist()})
        return json.dumps(
            content, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode()

    return best_seconds(default_path)


def main() -> None:
    rows: list[tuple[str, str, str, str]] = []
    core_only = "--core" in sys.argv

    def row(goal: str, measured: str, baseline: str, verdict: str) -> None:
        rows.append((goal, measured, baseline, verdict))
        print(f"{goal:58s} {measured:34s} {baseline:34s} {verdict}", flush=True)

    def fmt(load_: Load) -> str:
        return f"{load_.rps:8.0f} req/s p50 {load_.p50_ms:.1f} p99 {load_.p99_ms:.1f} ms"

    print(
        f"posenc benchmark, {datetime.date.today()}, {platform.machine()}, "
        f"{os.cpu_count()} cores, load by {'wrk' if shutil.which('wrk') else 'httpx'}\n"
    )
    core_table(row)
    runtime_recipes(row)
    config_answers(row)
    applied(row)
    if core_only:
        return
    from bench.cold import cold_answers

    with (
        server("--factory app.main:create_app") as (posenc, _),
        server("bench.baselines:hello") as (hello, _),
    ):
        cold_answers(row, posenc, hello)
    if "--cold" in sys.argv:
        write(rows)
        return
    startup(row)
    with (
        server("--factory app.main:create_app") as (posenc, _),
        server("bench.baselines:hello") as (hello, _),
        server("bench.baselines:tutorial") as (tutorial, _),
    ):
        hello_world = load(hello + "/hello")
        row("hello world (FastAPI)", fmt(hello_world), "-", "reference")
        tutorial_load = load(tutorial + "/table?seq_len=64&d_model=512")
        row("tutorial service, 64×512 JSON", fmt(tutorial_load), "-", "reference")
        for label, path in (
            ("issue 4 · 1. cached /v1/table 64×512 json", "/v1/table?d_model=512&seq_len=64"),
            (
                "issue 4 · 1. cached /v1/table 64×512 bin",
                "/v1/table?d_model=512&seq_len=64&format=bin",
            ),
            (
                "issue 4 · 1. cached /v1/encode one position",
                "/v1/encode?d_model=512&positions=12345",
            ),
        ):
            ours = load(posenc + path)
            ceiling = load(f"{hello}/bytes/{ours.size}")
            ratio = ours.rps / ceiling.rps
            row(
                label,
                fmt(ours),
                f"pre-built {ours.size} B: {ceiling.rps:.0f} req/s",
                f"{ratio:.0%} of ceiling (goal ≥ 80 %), {ours.rps / tutorial_load.rps:.0f}× "
                "tutorial",
            )
        big = "/v1/table?d_model=1024&seq_len=4096&format=bin"
        stream = load(posenc + big, connections=4)
        row(
            "issue 4 · 3. 16 MiB binary from cache",
            f"{stream.gbps:.2f} GB/s ({stream.rps:.0f} req/s)",
            "-",
            f"goal ≥ 1 GB/s: {'met' if stream.gbps >= 1 else 'missed'}",
        )

    from posenc import SinusoidalParams, table

    for n, d in ((8192, 1024), (32768, 4096)):
        nbytes = n * d * 4
        exact = nbytes / best_seconds(partial(table, SinusoidalParams(d_model=d), n, 0, "float32"))
        tut = nbytes / best_seconds(partial(tutorial_recipe, n, d), repeats=1)
        f32 = nbytes / best_seconds(partial(float32_recipe, n, d), repeats=1)
        row(
            f"issue 4 · 2. cold correctly rounded table {n}×{d} float32",
            f"{exact / 1e9:.2f} GB/s",
            f"tutorial {tut / 1e9:.2f}, float32 recipe {f32 / 1e9:.2f} GB/s",
            f"{exact / tut:.1f}× tutorial (goal ≥ 7×), {exact / f32:.2f}× float32 recipe "
            f"(goal ≥ 1), ≥ 2 GB/s: {'met' if exact >= 2e9 else 'missed'}",
        )
    row(
        "issue 4 · 2. max ulp error near 2^31 (400 samples, d=1024)",
        f"{max_ulp_near_the_top(1024):.4f} ulp",
        "-",
        "goal ≤ 1 ulp",
    )

    from app.formats import json_array

    array = table(SinusoidalParams(d_model=512), 1024, 0, "float32")
    ours_json = best_seconds(lambda: json_array(array))
    default_json = fastapi_default_json_seconds(array)
    row(
        "issue 4 · 3. JSON of a 1024×512 float32 table",
        f"{ours_json * 1e3:.1f} ms",
        f"FastAPI default {default_json * 1e3:.0f} ms",
        f"{default_json / ours_json:.0f}× faster (goal ≥ 20×)",
    )

    cache_mib = 64
    with server(
        "--factory app.main:create_app", {"POSENC_CACHE_BYTES": str(cache_mib * 2**20)}
    ) as (posenc, pid):
        peak = 0.0
        with httpx.Client(timeout=60) as client:
            for offset in range(0, 200 * 1024, 1024):
                client.get(
                    f"{posenc}/v1/table?d_model=1024&seq_len=1024&offset={offset}&format=bin"
                )
                peak = max(peak, rss_mib(pid))
        row(
            "issue 4 · 4. RSS over 200 distinct 4 MiB tables",
            f"peak {peak:.0f} MiB",
            f"bound {cache_mib} + 150 MiB",
            "met" if peak <= cache_mib + 150 else "missed",
        )

    write(rows)


def write(rows: list[tuple[str, str, str, str]]) -> None:
    results = ROOT / "bench" / f"results-{datetime.date.today()}.md"
    one, five, fifteen = os.getloadavg()
    lines = [
        f"# posenc benchmark, {datetime.date.today()}",
        "",
        f"{platform.machine()}, {os.cpu_count()} cores, one uvicorn worker, "
        f"load by {'wrk -t1 -c16 -d5s' if shutil.which('wrk') else 'httpx'} on loopback; "
        f"load average at the end {one:.2f}, {five:.2f}, {fifteen:.2f}.",
        "",
        "| goal | measured | baseline | verdict |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {' | '.join(cells)} |" for cells in rows]
    results.write_text("\n".join(lines) + "\n")
    print(f"\nwritten to {results.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
