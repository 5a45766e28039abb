"""`python -m bench.leak`: is the soak's memory growth a leak? tracemalloc answers.

Serves the app in this process with tracemalloc on, sends the soak's load at it from another
process (``python -m bench.soak --url``) and, every ``--interval`` seconds, records the
process's RSS, the bytes Python has traced, and the sizes of everything that could grow with
the traffic: the cache (entries, bytes, replayed answers among them), the metrics registry
(series per metric: a label that took a URL would grow here), logging handlers, threads, and
the garbage collector's objects. At the end it diffs the last snapshot against the first one
taken once the cache is full and prints the allocation sites that grew most. A leak is traced
bytes that keep growing once the cache is full; RSS that grows while they do not is the
allocator (freed memory not returned to the kernel), not the service.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from typing import Any

import uvicorn

from bench import soak
from tests.live.conftest import free_port

_IGNORED = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


def _figures(app: Any, begun: float) -> dict[str, float]:
    cache = app.state.cache
    stats = cache.stats()
    with cache._lock:  # a look inside, for this diagnosis only
        replayed = sum(1 for key in cache._entries if key and key[0] == "replay")
    series = {metric.name: len(metric.samples) for metric in app.state.metrics.registry.collect()}
    traced, _ = tracemalloc.get_traced_memory()
    return {
        "t": time.monotonic() - begun,
        "rss_mib": soak.rss_mib(os.getpid()),
        "traced_mib": traced / 2**20,
        "tracemalloc_own_mib": tracemalloc.get_tracemalloc_memory() / 2**20,
        "cache_mib": stats.bytes / 2**20,
        "cache_entries": stats.entries,
        "replay_entries": replayed,
        "metric_samples": sum(series.values()),
        "log_handlers": sum(
            len(logging.getLogger(n).handlers) for n in logging.root.manager.loggerDict
        )
        + len(logging.root.handlers),
        "threads": threading.active_count(),
        "gc_objects": len(gc.get_objects()),
        "gc_garbage": len(gc.garbage),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--interval", type=float, default=15.0)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    seconds = min(args.seconds, 600.0)
    os.environ.update(soak.SERVER_ENV)
    os.environ.setdefault("POSENC_LOG_LEVEL", "warning")
    tracemalloc.start(args.frames)
    from app.main import create_app  # after tracemalloc: its imports are traced too

    app = create_app()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            server_header=False,
        )
    )
    rows: list[dict[str, float]] = []
    snapshots: dict[str, tracemalloc.Snapshot] = {}

    def watch() -> None:
        while not server.started:
            time.sleep(0.1)
        begun = time.monotonic()
        load = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.soak",
                "--url",
                f"http://127.0.0.1:{port}",
                "--pid",
                str(os.getpid()),
                "--seconds",
                str(seconds),
            ]
        )
        # The cache fills within seconds; the baseline is taken after a quarter of the run.
        baseline_at = seconds / 4
        while load.poll() is None:
            time.sleep(args.interval)
            gc.collect()
            rows.append(_figures(app, begun))
            print(" ".join(f"{k}={v:.1f}" for k, v in rows[-1].items()), flush=True)
            if "baseline" not in snapshots and rows[-1]["t"] >= baseline_at:
                snapshots["baseline"] = tracemalloc.take_snapshot().filter_traces(_IGNORED)
        gc.collect()
        rows.append(_figures(app, begun))
        snapshots["end"] = tracemalloc.take_snapshot().filter_traces(_IGNORED)
        print("load exited with", load.returncode, flush=True)
        server.should_exit = True

    threading.Thread(target=watch, daemon=True).start()
    server.run()
    _report(rows, snapshots, args.top)


def _report(
    rows: list[dict[str, float]], snapshots: dict[str, tracemalloc.Snapshot], top: int
) -> None:
    if "baseline" not in snapshots:
        print("the run was too short for a baseline snapshot")
        return
    diff = snapshots["end"].compare_to(snapshots["baseline"], "traceback")
    total = sum(d.size_diff for d in diff)
    print(f"\ntraced bytes, end − baseline: {total / 2**20:+.2f} MiB in {len(diff)} sites")
    for stat in sorted(diff, key=lambda d: -abs(d.size_diff))[:top]:
        print(
            f"\n{stat.size_diff / 2**10:+.1f} KiB ({stat.count_diff:+d} blocks), now "
            f"{stat.size / 2**10:.1f} KiB"
        )
        for line in stat.traceback.format(limit=6):
            print("   ", line)
    late = [r for r in rows if r["t"] >= rows[0]["t"] + (rows[-1]["t"] - rows[0]["t"]) / 4]
    for name in ("rss_mib", "traced_mib", "cache_mib", "metric_samples", "gc_objects"):
        values = [r[name] for r in late]
        print(
            f"{name}: from {values[0]:.1f} to {values[-1]:.1f} (min {min(values):.1f}, "
            f"max {max(values):.1f}) after the first quarter"
        )


if __name__ == "__main__":
    main()
