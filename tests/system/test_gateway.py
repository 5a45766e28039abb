"""The project's nginx gateway, for real, on loopback in front of two uvicorn replicas."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from deploy.nginx.render import render
from tests.live.conftest import LiveServer, free_port, start_server, stop_server

pytestmark = [pytest.mark.live, pytest.mark.system, pytest.mark.serial]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@dataclass
class Gateway:
    url: str
    replicas: list[LiveServer]


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    assert Path(NGINX).exists(), "make test installs Debian's nginx"
    replicas = [start_server(), start_server()]
    state = Path(tempfile.mkdtemp(prefix="posenc-nginx-"))
    state.chmod(0o777)  # nginx's workers drop root and must write the cache and temp files
    port = free_port()
    conf = state / "nginx.conf"
    conf.write_text(
        render(
            [f"127.0.0.1:{r.port}" for r in replicas],
            f"127.0.0.1:{port}",
            str(state),
            rate="50r/s",
            burst=60,
        )
    )
    process = subprocess.Popen([NGINX, "-c", str(conf), "-g", "daemon off;"])
    assert process.poll() is None, (state / "error.log").read_text()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(url + "/healthz", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    yield Gateway(url, replicas)
    process.send_signal(signal.SIGQUIT)
    process.wait(timeout=10)
    for replica in replicas:
        if replica.process.poll() is None:
            stop_server(replica)
        else:  # the one a test killed
            replica.log.close()
    shutil.rmtree(state, ignore_errors=True)


def _requests_served(replica: LiveServer) -> float:
    text = httpx.get(f"{replica.url}/metrics").text
    return sum(
        float(v)
        for v in re.findall(
            r'posenc_requests_total\{method="GET",route="/v1/table"'
            r"[^}]*\} ([\d.]+)",
            text,
        )
    )


def test_requests_are_spread_over_both_replicas(gateway: Gateway) -> None:
    before = [_requests_served(r) for r in gateway.replicas]
    with httpx.Client(base_url=gateway.url) as client:
        for offset in range(20):
            assert client.get(f"/v1/table?d_model=8&seq_len=4&offset={offset}").status_code == 200
    after = [_requests_served(r) for r in gateway.replicas]
    assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)


def test_a_repeated_request_is_served_from_the_gateway_cache(gateway: Gateway) -> None:
    url = f"{gateway.url}/v1/table?d_model=16&seq_len=8&format=bin"
    first, second = httpx.get(url), httpx.get(url)
    assert first.headers["x-cache-status"] == "MISS"
    assert second.headers["x-cache-status"] == "HIT"
    assert second.content == first.content


def test_if_none_match_gives_304_through_the_gateway(gateway: Gateway) -> None:
    url = f"{gateway.url}/v1/table?d_model=12&seq_len=3"
    etag = httpx.get(url).headers["etag"]
    again = httpx.get(url, headers={"If-None-Match": etag})
    assert again.status_code == 304


def test_a_burst_beyond_the_rate_is_answered_429(gateway: Gateway) -> None:
    # 150 back-to-back requests in well under a second, against 50 r/s with a burst of 60.
    with httpx.Client(base_url=gateway.url) as client:
        statuses = [client.get("/healthz").status_code for _ in range(150)]
    assert statuses[:50] == [200] * 50
    assert statuses.count(429) >= 40
    time.sleep(2)  # let the limiter's bucket refill for the next test


def test_killing_a_replica_loses_no_request_and_none_waits_a_second(gateway: Gateway) -> None:
    victim = gateway.replicas[0]
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait(timeout=5)
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        for offset in range(30):
            start = time.perf_counter()
            response = client.get(f"/v1/table?d_model=8&seq_len=2&offset={1000 + offset}")
            assert response.status_code == 200
            assert time.perf_counter() - start < 1.0
