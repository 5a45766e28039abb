"""The service stays responsive while its heaviest requests run."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

import httpx
import pytest

from tests.live.conftest import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.serial]
FETCH = "import sys, httpx; assert httpx.get(sys.argv[1], timeout=60).status_code == 200"


def _healthz_latencies(live: LiveServer, round_: int) -> list[float]:
    """/healthz's latencies while four of the largest tables compute. Each table holds
    POSENC_MAX_ELEMENTS values; distinct offsets (per round too) defeat the caches. The load
    comes from other processes so that this one measures nothing but /healthz."""
    urls = [
        f"{live.url}/v1/table?d_model=4096&seq_len=4096&offset={(round_ * 4 + k) * 5000}&format=bin"
        for k in range(4)
    ]
    # curl, when there is one, downloads 64 MiB for far less CPU than a Python client.
    fetch = (
        ["curl", "-sf", "-o", "/dev/null"]
        if shutil.which("curl")
        else [sys.executable, "-c", FETCH]
    )
    workers = [subprocess.Popen([*fetch, url]) for url in urls]
    latencies = []
    with httpx.Client(base_url=live.url, timeout=5) as client:
        while any(worker.poll() is None for worker in workers):
            start = time.perf_counter()
            assert client.get("/healthz").status_code == 200
            latencies.append(time.perf_counter() - start)
            time.sleep(0.02)
    assert [worker.wait() for worker in workers] == [0, 0, 0, 0]
    assert len(latencies) >= 5, "the heavy requests finished before they could be measured"
    return latencies


def test_healthz_answers_within_100_ms_while_the_biggest_requests_compute(live: LiveServer) -> None:
    # On a 2-core machine the kernel can leave the server's loop unscheduled for one sample
    # (seen once in a full run: one of ~80 samples at 187 ms, the median 3 ms, and 0 of 5
    # reruns): a second round is measured then, and it must hold every sample.
    for round_ in range(2):
        latencies = _healthz_latencies(live, round_)
        if max(latencies) < 0.1:
            return
    raise AssertionError(
        f"median {statistics.median(latencies):.3f} s, max {max(latencies):.3f} s, twice"
    )
