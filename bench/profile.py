"""Where a cold answer's time goes: py-spy over a real uvicorn answering distinct cold requests.

``python -m bench.profile [--root DIR] [--requests N]`` starts ``uvicorn --factory
app.main:create_app`` from ``DIR`` (default: this tree; another checkout profiles its code),
warms it with two rounds (imports and the compiled loops' loading are not what a cold answer
costs), attaches ``py-spy record`` (every thread, idle ones left out), sends ``N`` rounds of
cold tables (bin, the issue's sizes, every request a new offset and a new base) and prints a
Markdown table of the request path's samples by what they were doing: the core's computation,
the frequencies and twiddles of a new base, fresh pages, sending, the app around them. py-spy
is a development tool, not a dependency: ``pip install py-spy`` first.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.run import free_port

ROOT = Path(__file__).resolve().parent.parent
TABLES = (
    ("sinusoidal", 2048, 512),
    ("sinusoidal", 8192, 1024),
    ("rope", 8192, 128),
    ("rope", 32768, 128),
)
# What a sample was doing: the first of these found walking from its innermost frame outwards.
CATEGORIES = (
    ("frequencies of a new base", ("geometric_turns", "scaled (", "doubledouble", "Turns.from")),
    ("twiddles of a new base", ("_twiddles",)),
    ("fresh pages of the output", ("fresh_output", "fault_in")),
    ("computation (compiled loops)", ("rotated_table", "exact_table")),
    ("cache insertion", ("posenc/cache.py",)),
    (
        "sending (socket writes)",
        ("RequestResponseCycle.send", "_PiecesResponse.__call__", "_Sender."),
    ),
    ("body, ETag, headers", ("Body.of", "etag_for", "app/responses.py", "app/formats.py")),
    ("replay recording", ("app/replay.py",)),
    ("validation", ("solve_dependencies", "request_params_to_args")),
    ("admission, thread hop", ("app/admission.py", "to_thread", "CapacityLimiter")),
    ("handler, cost, estimate", ("app/handlers.py", "app/serving.py", "app/models.py")),
    ("middleware, routing", ("routing.py", "middleware", "app/metrics.py", "observability")),
)


def drive(url: str, rounds: int, first: int = 0) -> int:
    with httpx.Client(timeout=120) as client:
        for _ in range(300):
            try:
                client.get(url + "/healthz")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        for scheme, n, d in TABLES:  # the compiled loops loaded, as in a warm service
            client.get(f"{url}/v1/{scheme}/table?d_model={d}&seq_len={n}&format=bin")
        for k in range(first, first + rounds):  # the round makes every offset and base new
            for scheme, n, d in TABLES:
                query = f"d_model={d}&seq_len={n}&format=bin&offset={1000 + 7 * k}"
                response = client.get(f"{url}/v1/{scheme}/table?{query}&base={20000 + k / 2}")
                response.raise_for_status()
    return rounds * len(TABLES)


def categorise(raw: str) -> tuple[int, collections.Counter[str]]:
    """Samples of the request path (the event loop's request cycles and the worker threads'
    work; threads waiting for work left out) by category."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, number = line.rpartition(" ")
        if ("run_asgi" not in stack and "WorkerThread" not in stack) or "Queue.get" in stack:
            continue
        samples = int(number)
        total += samples
        frames = stack.split(";")
        found = next(
            (
                name
                for frame in reversed(frames)
                for name, keys in CATEGORIES
                if any(key in frame for key in keys)
            ),
            "other",
        )
        counts[found] += samples
    return total, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--requests", type=int, default=25, help="rounds of the four tables")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        sys.exit("py-spy is not installed: pip install py-spy")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "app.main:create_app", "--port", str(port),
         "--no-access-log", "--log-level", "warning"],
        cwd=args.root,
        env={**os.environ, "POSENC_LOG_LEVEL": "warning", "PYTHONPATH": str(args.root)},
    )  # fmt: skip
    try:
        drive(url, 2)  # imports, compiled loops, first tables: not what a cold answer costs
        with tempfile.TemporaryDirectory() as scratch:
            raw = Path(scratch) / "raw.txt"
            recorder = subprocess.Popen(
                [spy, "record", "--pid", str(server.pid), "-r", str(args.rate),
                 "--format", "raw", "-o", str(raw)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)  # py-spy attached
            started = time.perf_counter()
            count = drive(url, args.requests, first=2)
            elapsed = time.perf_counter() - started
            recorder.send_signal(signal.SIGINT)
            recorder.wait(timeout=60)
            total, counts = categorise(raw.read_text())
            if args.raw:
                shutil.copyfile(raw, args.raw)
    finally:
        server.terminate()
        server.wait(timeout=10)
    ms_per_sample = 1000 / args.rate
    print(
        f"{count} cold requests (bin, each a new offset and a new base) in {elapsed:.1f} s; "
        f"load average {os.getloadavg()[0]:.2f}; {total} samples of the request path at "
        f"{args.rate} Hz\n"
    )
    print("| what | samples | share | ms per request |")
    print("| --- | ---: | ---: | ---: |")
    for name, samples in counts.most_common():
        per_request = samples * ms_per_sample / count
        print(f"| {name} | {samples} | {samples / total:.1%} | {per_request:.2f} |")


if __name__ == "__main__":
    main()
