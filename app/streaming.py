"""A cold table sent as the core finishes its rows, so that computing it overlaps sending it.

Computed whole and then sent, a cold ``bin`` or ``npy`` table kept its client waiting for the
sum of both; here the compiled loops tell the event loop (from the worker thread) how many rows
are final, and those leave while the next are computed. The table is cached as any other once
complete, and its answer kept for replay as it was sent.

The status and headers go out with the first rows, so whatever fails before them (a dtype that
cannot hold the table, the deadline while waiting for a thread) is still a problem answer. After
them, a lost client's work stops and the answer ends there; the deadline (or any failure) ends
the connection short of its Content-Length, which every HTTP client reports as a truncated body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable
from typing import Any

import numpy.typing as npt
from fastapi import Request, Response
from starlette.types import Receive, Scope, Send

from app import formats
from app.admission import ClientGoneError, run

Array = npt.NDArray[Any]
_log = logging.getLogger("posenc.streaming")
# compute(finished) → the table, telling ``finished(out, rows)`` of the rows final so far.
Compute = Callable[[Callable[[Array, int], None]], Array]


def streamable(fmt: str, dtype: str) -> bool:
    """Raw values only, in the machine's own byte order (they leave as the loops wrote them);
    float16 is checked for infinities once computed (``responses._check_range``)."""
    return fmt in ("bin", "npy") and dtype in ("float32", "float64") and sys.byteorder == "little"


class StreamedTable(Response):
    """Sends ``head`` (npy's header, or nothing), then the table's rows as they are final."""

    def __init__(
        self,
        request: Request,
        compute: Compute,
        head: bytes,
        media_type: str,
        headers: dict[str, str],
    ) -> None:
        self.request = request
        self.compute = compute
        self.head = head
        super().__init__(None, media_type=media_type, headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        latest: list[tuple[Array, int]] = []

        def finished(out: Array, rows: int) -> None:  # in the worker thread
            latest[:] = [(out, rows)]
            loop.call_soon_threadsafe(wake.set)

        work = asyncio.ensure_future(run(self.request, self.compute, finished))
        work.add_done_callback(lambda _: wake.set())
        sender = _Sender(send, self.status_code, self.raw_headers, self.head)
        try:
            while not work.done():
                await wake.wait()
                wake.clear()
                if latest and not sender.complete:
                    out, rows = latest[-1]
                    await sender.rows(out, rows)
            table = work.result()
        except Exception as failure:
            if not sender.started:
                raise  # the problem answer is still the answer
            # Past the status line there is no problem answer to give: the connection ends
            # short of its Content-Length, which the client reads as a truncated body (and a
            # client that left reads nothing more).
            if not isinstance(failure, ClientGoneError):
                _log.warning(
                    "a streamed table cut short after %d bytes of values: %s", sender.sent, failure
                )
            return
        finally:
            if not work.done():  # this response was cancelled: stop the work, wait for it
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
        if sender.buffer is not None and table.ctypes.data != sender.buffer:
            # The rows sent were another array's: a broken promise of the scheme's table.
            raise RuntimeError("a table reported rows of an array it did not return")
        if not sender.complete:
            await sender.rest(table)


class _Sender:
    """The bytes of a table sent so far, from the first row on: a plane's rows are contiguous,
    so the first plane leaves row by row and any other once every row is final."""

    def __init__(
        self, send: Send, status: int, headers: list[tuple[bytes, bytes]], head: bytes
    ) -> None:
        self.send, self.status, self.headers, self.head = send, status, headers, head
        self.sent = 0
        self.started = False
        self.complete = False
        self.buffer: int | None = None  # the address of the array rows were sent from

    async def rows(self, out: Array, rows: int) -> None:
        """``out`` (planes, rows, columns): its rows before ``rows`` are final in every plane.
        Once all are, the rest leaves at once, while the table is being cached."""
        self.buffer = out.ctypes.data
        values = out.data.cast("B").toreadonly()
        if rows == out.shape[1]:
            await self._body(values[self.sent :], more=False)
            self.complete = True
            return
        ready = rows * out.shape[2] * out.itemsize
        if self.sent < ready:
            await self._body(values[self.sent : ready], more=True)

    async def rest(self, table: Array) -> None:
        """A table that told of no rows (computed another way) leaves whole."""
        _, values = formats.raw(table, "bin")
        await self._body(values[self.sent :], more=False)

    async def _body(self, piece: memoryview, more: bool) -> None:
        if not self.started:
            self.started = True
            start = {"type": "http.response.start", "status": self.status, "headers": self.headers}
            await self.send(start)
            if self.head:
                head = {"type": "http.response.body", "body": self.head, "more_body": True}
                await self.send(head)
        self.sent += len(piece)
        await self.send({"type": "http.response.body", "body": piece, "more_body": more})
