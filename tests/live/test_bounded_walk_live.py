"""The walk of every operation at its extremes (tests/walk.py), sent to a real uvicorn that runs
under an address-space limit (tests/live/bounded.py): an allocation nothing declared fails the
test with a 500 instead of taking the machine. Each request is answered or refused in well under
a second, and the process's resident peak grows by no more than the request reserved (as the
same request reserved in process, where tracemalloc measured it)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.live.bounded import memory, reset_peak, start_bounded_server
from tests.live.conftest import LiveServer, stop_server
from tests.walk import REFUSAL_BYTES, SETTINGS, Outcome, warm_up

pytestmark = [pytest.mark.live, pytest.mark.serial]

# What RSS holds beyond what Python allocates: a worker thread's stack, the allocator's arenas
# and rounding, pages of the compiled loops first touched by a request.
SLACK = 24 * 2**20
WELL_UNDER_A_SECOND = 0.75


@pytest.fixture(scope="module")
def bounded() -> Iterator[LiveServer]:
    env = {f"POSENC_{name.upper()}": str(value) for name, value in SETTINGS.items()}
    server = start_bounded_server(env)
    yield server
    stop_server(server)


def test_every_request_of_the_walk_is_bounded_in_time_and_memory(
    bounded: LiveServer, bounded_walk: list[Outcome]
) -> None:
    pid = bounded.process.pid
    failures: list[str] = []
    slowest, largest = 0.0, 0
    with httpx.Client(base_url=bounded.url, timeout=30) as client:
        for warming in warm_up():
            assert client.get(warming.url).status_code < 500, warming
        for measured in bounded_walk:
            walked = measured.walked
            assert reset_peak(pid), "the kernel lets a process's peak be reset (Linux ≥ 4.0)"
            before = memory(pid)["VmRSS"]
            started = time.perf_counter()
            response = client.request(
                walked.method, walked.url, content=walked.body, headers=dict(walked.headers)
            )
            seconds = time.perf_counter() - started
            grown = memory(pid)["VmHWM"] - before
            allowed = max(measured.reserved, REFUSAL_BYTES) + SLACK
            slowest, largest = max(slowest, seconds), max(largest, grown)
            if response.status_code >= 500 or seconds > WELL_UNDER_A_SECOND or grown > allowed:
                failures.append(
                    f"{response.status_code} in {seconds:.2f} s, RSS +{grown / 2**20:.1f} MiB "
                    f"(allowed {allowed / 2**20:.1f}): {walked}"
                )
    print(
        f"{len(bounded_walk)} requests: slowest {slowest:.3f} s, "
        f"largest RSS peak +{largest / 2**20:.1f} MiB"
    )
    assert bounded.process.poll() is None, "the server died during the walk"
    assert not failures, f"{len(failures)} of {len(bounded_walk)}:\n" + "\n".join(failures[:20])
