"""A cold bin or npy table leaves as its rows are computed (app/streaming.py, issue 25).

Driven through the ASGI app with the server's own messages recorded: the bytes are the core's
table bit for bit, the rows leave before the table is complete, and what fails before the first
rows is a problem answer while what fails after them ends the answer short.
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import MutableMapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from fastapi import Request

from app.admission import RequestTimeoutError
from app.main import create_app
from app.settings import Settings
from app.streaming import StreamedTable
from posenc import cancel
from posenc.errors import InconsistentError
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal.params import SinusoidalParams
from tests.conftest import get_scope

Message = MutableMapping[str, Any]


class Exchange:
    """One request's messages: the server's as sent, and a client that leaves when told."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.leave = asyncio.Event()
        self.requested = False

    async def receive(self) -> Message:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def bodies(self) -> list[bytes]:
        return [bytes(m["body"]) for m in self.sent if m["type"] == "http.response.body"]

    @property
    def complete(self) -> bool:
        last = self.sent[-1] if self.sent else {}
        return last.get("type") == "http.response.body" and not last.get("more_body", False)


def _get(app: Any, path: str, query: str) -> Exchange:
    exchange = Exchange()

    async def go() -> None:
        await app(get_scope(path, query.encode()), exchange.receive, exchange.send)

    asyncio.run(go())
    return exchange


def _values(exchange: Exchange, fmt: str, dtype: str, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    body = b"".join(exchange.bodies)
    if fmt == "npy":
        return np.asarray(np.load(io.BytesIO(body), allow_pickle=False))
    return np.frombuffer(body, dtype=dtype).reshape(shape)


# Each several calls of the loops long (kernels._REPORTED_CALL), so several pieces are sent.
CASES = [
    ("sinusoidal", 2048, 512, "float32", ""),
    ("sinusoidal", 4000, 130, "float64", ""),
    ("rope", 8192, 128, "float32", "cos_sin"),
    ("rope", 16384, 64, "float32", "sin"),
    ("rope", 6000, 96, "float64", "cos_sin"),
]


@pytest.mark.parametrize("fmt", ["bin", "npy"])
@pytest.mark.parametrize(("scheme", "n", "d", "dtype", "component"), CASES)
def test_a_cold_table_streamed_is_the_cores_table_bit_for_bit(
    fmt: str, scheme: str, n: int, d: int, dtype: str, component: str
) -> None:
    app = create_app(Settings(log_level="warning"))
    offset = 123_456
    query = f"d_model={d}&seq_len={n}&offset={offset}&dtype={dtype}&format={fmt}"
    if scheme == "rope":
        expected = rope.table(RopeParams(d_model=d), n, offset, dtype, component)
        query += f"&component={component}"
    else:
        expected = sinusoidal.table(SinusoidalParams(d_model=d), n, offset, dtype)  # type: ignore[arg-type]
    cold = _get(app, f"/v1/{scheme}/table", query)
    start = cold.sent[0]
    assert start["status"] == 200 and cold.complete
    headers = dict(start["headers"])
    assert int(headers[b"content-length"]) == sum(map(len, cold.bodies))
    assert headers[b"x-array-shape"] == ",".join(map(str, expected.shape)).encode()
    served = _values(cold, fmt, dtype, expected.shape)
    assert served.shape == expected.shape and served.tobytes() == expected.tobytes()
    # Rows left in more pieces than a head and its values: they went as they were computed.
    assert len(cold.bodies) >= 3 + (fmt == "npy")
    again = _get(app, f"/v1/{scheme}/table", query)  # replayed as it was sent
    assert again.bodies == cold.bodies
    assert dict(again.sent[0]["headers"])[b"etag"] == headers[b"etag"]


def test_the_streamed_table_is_cached_for_other_formats() -> None:
    app = create_app(Settings(log_level="warning"))
    query = "d_model=256&seq_len=1024&dtype=float32"
    cold = _get(app, "/v1/sinusoidal/table", query + "&format=bin")
    hits = app.state.cache.stats().hits
    npy = _get(app, "/v1/sinusoidal/table", query + "&format=npy")
    assert app.state.cache.stats().hits == hits + 1  # the array was there: nothing recomputed
    assert _values(npy, "npy", "float32", (1024, 256)).tobytes() == b"".join(cold.bodies)


# StreamedTable alone, with a table that waits for its client: deterministic, no timing.


def _streamed(compute: Any, on_body: Any = None) -> tuple[Exchange, BaseException | None]:
    """``compute`` streamed to a client; ``on_body(exchange)`` runs as each body piece arrives."""
    app = create_app(Settings(log_level="warning"))
    exchange = Exchange()
    scope = {**get_scope("/v1/rope/table", b""), "app": app}
    response = StreamedTable(
        Request(scope, exchange.receive), compute, b"", "application/octet-stream", {}
    )
    failure: BaseException | None = None

    async def send(message: Message) -> None:
        exchange.sent.append(message)
        if on_body is not None and message["type"] == "http.response.body":
            on_body(exchange)

    async def go() -> None:
        nonlocal failure
        try:
            await response(scope, exchange.receive, send)
        except Exception as error:
            failure = error

    asyncio.run(go())
    return exchange, failure


def _rows_then(then: Any) -> Any:
    """A table of 4 rows: the first 2 final, then whatever ``then`` does, then the last 2."""

    def compute(finished: Any) -> npt.NDArray[np.float32]:
        out = np.zeros((1, 4, 2), dtype=np.float32)
        out[0, :2] = 1
        finished(out, 2)
        then()
        out[0, 2:] = 2
        finished(out, 4)
        table: npt.NDArray[np.float32] = out[0]
        return table

    return compute


def test_the_first_rows_leave_while_the_table_is_still_being_computed() -> None:
    first_sent = threading.Event()

    def wait_for_the_first_rows() -> None:
        # Unless the first rows leave before the table is returned, this waits in vain.
        if not first_sent.wait(10):
            raise AssertionError("the first rows were not sent while the table was computed")

    exchange, failure = _streamed(_rows_then(wait_for_the_first_rows), lambda _: first_sent.set())
    assert failure is None and exchange.complete
    ones, twos = np.ones(4, np.float32), np.full(4, 2, np.float32)
    assert exchange.bodies == [ones.tobytes(), twos.tobytes()]


def test_a_failure_before_the_first_rows_is_the_answer() -> None:
    def refuse(finished: Any) -> Any:
        raise InconsistentError("dtype", "cannot hold it")

    exchange, failure = _streamed(refuse)
    assert isinstance(failure, InconsistentError) and exchange.sent == []


def test_a_failure_after_the_first_rows_ends_the_answer_short(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No problem answer can follow a status line: the answer ends short of its length, and
    the log says why at warning level, not as an unexpected error."""
    first_sent = threading.Event()

    def fail() -> None:
        first_sent.wait(10)
        raise RequestTimeoutError(0.05)

    with caplog.at_level(logging.WARNING, logger="posenc.streaming"):
        exchange, failure = _streamed(_rows_then(fail), lambda _: first_sent.set())
    assert failure is None
    assert exchange.sent[0]["type"] == "http.response.start" and not exchange.complete
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "cut short" in record.getMessage()


def test_a_client_that_leaves_stops_the_work_and_the_answer() -> None:
    stopped = threading.Event()

    def until_cancelled() -> None:
        try:
            for _ in range(10_000):
                cancel.checkpoint()
                threading.Event().wait(0.001)
        except cancel.WorkCancelledError:
            stopped.set()
            raise

    def leave(exchange: Exchange) -> None:
        exchange.leave.set()  # the client reads the first rows and goes

    exchange, failure = _streamed(_rows_then(until_cancelled), leave)
    assert failure is None  # nobody is left to answer: it returns quietly
    assert stopped.is_set() and not exchange.complete
    assert exchange.bodies == [np.ones(4, np.float32).tobytes()]


def test_tables_written_into_spare_pages_are_the_cores_and_never_overwrite_an_answer() -> None:
    # A cache of 16 MiB turns over after a few 4 MiB tables (cos and sin of 4096 × 128): later
    # ones are written into the pages of those it let go (posenc.pages). The npy twin of the
    # first answer is held here as the transport holds it, a memoryview of the cached (sealed)
    # array, while the streamed answer, whose bodies are views of the loops' own array, is let
    # go: the twin alone must keep the pages from every table after it.
    app = create_app(Settings(log_level="warning", cache_bytes=16 * 2**20))
    params = RopeParams(d_model=128)

    def cold(offset: int, fmt: str = "bin") -> tuple[Exchange, bytes]:
        query = f"d_model=128&seq_len=4096&offset={offset}&format={fmt}"
        expected = rope.table(params, 4096, offset, "float32").tobytes()
        return _get(app, "/v1/rope/table", query), expected

    first, first_expected = cold(0)
    hits = app.state.cache.stats().hits
    twin, _ = cold(0, "npy")
    assert app.state.cache.stats().hits == hits + 1  # the cached array, not computed again
    assert b"".join(first.bodies) == first_expected
    del first
    for offset in range(1, 25):
        exchange, expected = cold(offset * 4099)
        assert b"".join(exchange.bodies) == expected
    assert app.state.cache.stats().spares_reused > 0
    assert _values(twin, "npy", "float32", (2, 4096, 128)).tobytes() == first_expected
    metrics = _get(app, "/metrics", "")
    reused = [
        line
        for line in b"".join(metrics.bodies).decode().splitlines()
        if line.startswith("posenc_spares_reused")
    ]
    assert reused and float(reused[0].split()[-1]) > 0
