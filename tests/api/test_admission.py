"""Cost before work: refusals that cost nothing, a memory budget that queues and sheds, work that
stops with its answer, and reservations that always come back."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from starlette.requests import Request

from app.admission import Budget, ClientGoneError, OverloadedError, run
from app.resources import confine_to_quota, memory_limit, usable_cpus
from posenc import cancel
from tests.conftest import Client

HUGE = 2_000_000_000
ENDPOINTS = [
    f"/v1/table?d_model=8&seq_len={HUGE}",
    f"/v1/table?d_model=65536&seq_len={HUGE}&format=bin",
    f"/v1/table?scheme=alibi&seq_len={HUGE}",
    f"/v1/table?scheme=t5&seq_len={HUGE}",
    f"/v1/table?scheme=rope&d_model=128&seq_len={HUGE}",
    f"/v1/similarity?d_model=8&seq_len={HUGE}",
    f"/v1/similarity?d_model=8&seq_len={HUGE}&reference=0",
    f"/v1/verify?d_model=8&seq_len={HUGE}",
    f"/v1/verify?scheme=t5&seq_len={HUGE}",
    "/v1/table?scheme=sinusoidal2d&d_model=8&grid=4096,4096",
]


@pytest.mark.parametrize("url", ENDPOINTS)
def test_a_two_billion_position_query_is_refused_without_allocating(
    client: Client, url: str
) -> None:
    client.get("/v1/table?d_model=4&seq_len=2")  # first-request set-up out of the measurement
    tracemalloc.start()
    try:
        response = client.get(url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 422
    assert response.json()["type"] == "urn:posenc:problem:limit-exceeded"
    assert peak < 2**20, f"refusing took {peak} bytes"


def test_an_answer_larger_than_the_whole_budget_names_its_cost_and_the_budget(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(memory_bytes=2**24)
    response = client.get("/v1/table?d_model=512&seq_len=8192&format=bin")
    problem = response.json()
    assert response.status_code == 422
    assert problem["type"] == "urn:posenc:problem:limit-exceeded"
    assert "POSENC_MEMORY_BYTES" in problem["detail"] and str(2**24) in problem["detail"]
    assert problem["errors"][0]["loc"] == ["query", "seq_len"]
    assert client.get("/v1/table?d_model=4&seq_len=2").status_code == 200


def test_work_over_the_work_limit_is_refused_naming_it(
    client_with: Callable[..., Client],
) -> None:
    response = client_with(max_work=10**6).get("/v1/verify?scheme=t5&seq_len=2000")
    assert response.status_code == 422
    assert "POSENC_MAX_WORK" in response.json()["detail"]


def test_a_request_that_cannot_fit_now_waits_then_is_shed_with_retry_after(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(admission_wait_s=0.05)
    budget: Budget = client.app.state.budget
    budget.held = budget.capacity  # as if other requests held everything
    response = client.get("/v1/table?d_model=4&seq_len=3")
    assert response.status_code == 503
    assert response.json()["type"] == "urn:posenc:problem:overloaded"
    assert response.headers["retry-after"] == "1"
    budget.held = 0
    assert client.get("/v1/table?d_model=4&seq_len=3").status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/v1/table?d_model=64&seq_len=64&format=json",
        "/v1/table?d_model=64&seq_len=64&format=png",
        "/v1/encode?d_model=8&positions=1,2,3",
        "/v1/similarity?d_model=8&seq_len=16",
        "/v1/verify?d_model=8&seq_len=16",
        "/v1/table?d_model=0&seq_len=2",
        "/v1/table?d_model=4096&seq_len=4096&format=bin",
    ],
)
@pytest.mark.parametrize("timeout_s", [0.001, 30.0], ids=["timed-out", "served"])
def test_every_reservation_comes_back_whatever_the_answer(
    client_with: Callable[..., Client], url: str, timeout_s: float
) -> None:
    client = client_with(request_timeout_s=timeout_s)
    budget: Budget = client.app.state.budget
    during: list[tuple[int, int]] = []
    reserve = budget.reserve

    async def watched(nbytes: int) -> None:
        await reserve(nbytes)
        during.append((budget.held, budget.admitted))

    budget.reserve = watched  # type: ignore[method-assign]
    status = client.get(url).status_code
    served = {200, 503} if timeout_s < 1 else {200}  # a tiny table may beat even 1 ms
    assert status == 422 if "d_model=0" in url else status in served
    # What was held while it ran (nothing for a refusal) all came back after it.
    assert bool(during) == (status != 422)
    assert (budget.held, budget.admitted) == (0, 0)


def test_work_past_its_deadline_stops_before_the_answer_and_frees_its_thread(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(request_timeout_s=0.001)
    response = client.get("/v1/table?d_model=4096&seq_len=4096&format=bin")
    assert response.status_code == 503
    assert response.json()["type"] == "urn:posenc:problem:timeout"
    limiter: anyio.CapacityLimiter = client.app.state.limiter
    assert limiter.borrowed_tokens == 0


def test_a_client_that_disconnects_stops_its_work_at_the_next_checkpoint() -> None:
    app = FastAPI()
    served = Client().app.state  # a service's settings and cache, around a bare app
    app.state.settings, app.state.cache = served.settings, served.cache
    app.state.limiter = None
    disconnected = asyncio.Event()
    checkpoints: list[float] = []

    async def receive() -> dict[str, Any]:
        await disconnected.wait()
        return {"type": "http.disconnect"}

    def endless() -> None:
        while True:  # stands for a long chunked computation
            checkpoints.append(time.monotonic())
            cancel.checkpoint()
            time.sleep(0.005)

    async def scenario() -> float:
        request = Request({"type": "http", "app": app, "headers": []}, receive)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, disconnected.set)
        with pytest.raises(ClientGoneError):
            await run(request, endless)
        return time.monotonic()

    ended = asyncio.run(scenario())
    assert len(checkpoints) > 1  # it was running, and then it stopped
    assert ended - checkpoints[-1] < 0.1


def test_the_budget_serves_first_come_first_served_and_bounds_its_queue() -> None:
    async def scenario() -> list[str]:
        budget = Budget(capacity=10, queue_length=2, wait_s=1.0)
        order: list[str] = []
        await budget.reserve(8)

        async def wants(name: str, nbytes: int) -> None:
            await budget.reserve(nbytes)
            order.append(name)

        big = asyncio.create_task(wants("big", 9))
        await asyncio.sleep(0)
        small = asyncio.create_task(wants("small", 1))  # fits now, but waits behind "big"
        await asyncio.sleep(0)
        with pytest.raises(OverloadedError):
            await budget.reserve(1)  # the queue holds two already
        assert order == []
        budget.release(8)
        await asyncio.gather(big, small)
        assert budget.held == 10
        return order

    assert asyncio.run(scenario()) == ["big", "small"]


def test_a_waiter_that_times_out_lets_those_behind_it_through() -> None:
    async def scenario() -> int:
        budget = Budget(capacity=10, queue_length=4, wait_s=0.05)
        await budget.reserve(8)
        big = asyncio.create_task(budget.reserve(9))
        await asyncio.sleep(0.03)
        small = asyncio.create_task(budget.reserve(2))  # its wait ends 30 ms after big's
        with pytest.raises(OverloadedError):
            await big
        await small
        return budget.held

    assert asyncio.run(scenario()) == 10


@pytest.mark.parametrize(
    ("cpu_max", "expected"), [("150000 100000", 2), ("50000 100000", 1), ("max 100000", None)]
)
def test_threads_follow_the_cgroup_cpu_quota(
    tmp_path: Path, cpu_max: str, expected: int | None
) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    affinity = len(__import__("os").sched_getaffinity(0))
    assert usable_cpus(tmp_path) == min(affinity, expected or affinity)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"memory.max": "536870912"}, 536870912),
        ({"memory.max": "max"}, None),
        ({"memory/memory.limit_in_bytes": "9223372036854771712"}, None),
        ({"memory/memory.limit_in_bytes": "805306368"}, 805306368),
        ({}, None),
    ],
)
def test_the_memory_limit_is_read_from_cgroup_v2_or_v1(
    tmp_path: Path, files: dict[str, str], expected: int | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    assert memory_limit(tmp_path) == expected


def test_a_process_with_a_one_cpu_quota_is_confined_to_one_core(tmp_path: Path) -> None:
    import os
    import threading

    (tmp_path / "cpu.max").write_text("100000 100000\n")
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("one core only: nothing to confine")
    started = threading.Event()
    stop = threading.Event()

    def worker() -> None:
        started.set()
        stop.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait()
    try:
        assert confine_to_quota(tmp_path) == 1
        assert len(os.sched_getaffinity(0)) == 1
        assert thread.native_id is not None
        assert len(os.sched_getaffinity(thread.native_id)) == 1  # every thread, not just this
    finally:
        stop.set()
        thread.join()
        for task in Path("/proc/self/task").iterdir():
            try:
                os.sched_setaffinity(int(task.name), before)
            except OSError:
                pass


def test_a_request_whose_parts_together_exceed_the_budget_is_refused_not_queued(
    client_with: Callable[..., Client],
) -> None:
    # The body's parse (5·4 MiB + 24 MiB) and the answer (≈ 28 MiB) each fit 64 MiB; together
    # they never can, and waiting for the rest of the budget would only end in a 503.
    client = client_with(memory_bytes=64 * 2**20, admission_wait_s=30, max_positions=2**20)
    head = b'{"d_model": 4, "positions": [' + b"1," * 200_000 + b"1]"
    body = head + b" " * (4 * 2**20 - len(head)) + b"}"
    json = {"Content-Type": "application/json"}
    response = client.post("/v1/encode?format=bin", content=body, headers=json)
    problem = response.json()
    assert response.status_code == 422
    assert problem["type"] == "urn:posenc:problem:limit-exceeded"
    assert "holds already" in problem["detail"]
    budget: Budget = client.app.state.budget
    assert (budget.held, budget.admitted) == (0, 0)


def test_work_stops_when_its_request_is_cancelled() -> None:
    app = FastAPI()
    served = Client().app.state  # a service's settings and cache, around a bare app
    app.state.settings, app.state.cache = served.settings, served.cache
    app.state.limiter = None
    checkpoints: list[float] = []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays: only the request's task is cancelled
        raise AssertionError

    def endless() -> None:
        while True:
            checkpoints.append(time.monotonic())
            cancel.checkpoint()
            time.sleep(0.005)

    async def scenario() -> float:
        request = Request({"type": "http", "app": app, "headers": []}, receive)
        task = asyncio.create_task(run(request, endless))
        # Cancelled once the work has passed two checkpoints: a fixed wait was too short on a
        # loaded machine, where the thread had not yet started.
        for _ in range(500):
            if len(checkpoints) > 1:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises((asyncio.CancelledError, cancel.WorkCancelledError)):
            await task
        return time.monotonic()

    ended = asyncio.run(scenario())
    assert len(checkpoints) > 1
    time.sleep(0.3)  # a thread left running goes on adding checkpoints
    # The thread stopped at its next checkpoint, not at the request's deadline seconds later.
    assert checkpoints[-1] - ended < 0.1
