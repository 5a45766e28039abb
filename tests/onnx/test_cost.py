"""What ``POST /v1/rope/onnx`` declares it costs, from the body's length before any work, held
to what the costliest bodies (tests/onnx/costliest.py) measurably take: their peak of traced
memory, and their time on one core (``thread_time``: what this thread ran, not what the other
workers on the machine did)."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest

from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.cost import Cost
from posenc.declare import Part, Upload
from posenc.errors import PosencError
from posenc.schemes.rope.onnx import operation
from tests.onnx.costliest import BODIES


def _given(name: str) -> Upload:
    data, sent = BODIES[name]()
    external = tuple(Part(part, filename=filename) for filename, part in sent)
    return Upload(b"", {}, {}, {"model": (Part(data),), "external": external})


def _cpu_time(given: Upload) -> int:
    started = time.thread_time_ns()
    _handle(given)
    return time.thread_time_ns() - started


def _handle(given: Upload) -> dict[str, Any] | None:
    """The answer, or None where the body is refused with the service's own error."""
    try:
        return operation.handle(given, SERVICE_DEFAULTS)
    except PosencError:
        return None


def _declared(given: Upload) -> Cost:
    return operation.size(given, SERVICE_DEFAULTS).cost


@pytest.mark.parametrize("name", list(BODIES))
def test_the_declared_bytes_hold_the_traced_peak_of_the_costliest_bodies(name: str) -> None:
    given = _given(name)
    declared = _declared(given)
    tracemalloc.start()
    try:
        answer = _handle(given)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if name == "the widest cache":
        assert answer is not None and answer["ropes"][0]["params"] is not None
    assert peak <= declared.bytes, f"{name}: {peak} B traced, {declared.bytes} B declared"


@pytest.mark.serial
@pytest.mark.parametrize("name", list(BODIES))
def test_the_declared_work_holds_the_time_the_costliest_bodies_take(name: str) -> None:
    given = _given(name)
    declared = _declared(given)
    _handle(given)  # compiled loops and imports warm
    # The least of three: noise (another process's burst, a neighbour on this VM's host) only
    # adds, and once added 4x to one body's time in a full run.
    took = min(_cpu_time(given) for _ in range(3))
    assert took <= declared.work, f"{name}: {took} ns taken, {declared.work} declared"
