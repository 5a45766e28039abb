"""Cost before work: every request is measured, admitted or refused, then run under a deadline.

The flow of a computational request:

1. :func:`decide` compares its :class:`Estimate` (known from the parameters alone) with every
   limit — values in the answer, text values, work, and the memory budget as a whole. Anything
   that can never be served is a 422 ``limit-exceeded`` naming the figure and the limit. This is
   the one place where those limits are decided.
2. :func:`admit` reserves the estimate's bytes against the :class:`Budget`. When they do not fit
   now, the request waits in a short bounded queue; if the queue is full or the wait runs out, it
   is a 503 ``overloaded`` with ``Retry-After``.
3. :func:`run` does the work in the bounded thread pool with a :class:`~posenc.cancel.CancelToken`
   whose deadline is ``POSENC_REQUEST_TIMEOUT_S``, cancelled too if the client disconnects; the
   core checks it between chunks, so no work outlives its answer.
4. :class:`AdmissionMiddleware` releases what a request reserved once its response has been sent
   (or the client has gone), whatever happened in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.settings import Settings
from posenc import cancel, pages
from posenc.cost import Cost
from posenc.errors import LimitError

Result = TypeVar("Result")
HOLDING = "posenc.holding"


@dataclass(frozen=True)
class Estimate:
    """What an answer will cost, and what a refusal names: ``param`` sized it, ``what`` it is."""

    cost: Cost
    values: int
    text: bool
    param: str
    what: str


class OverloadedError(Exception):
    """The request fits the budget, but not now: the caller should retry shortly."""

    retry_after_s = 1


class RequestTimeoutError(Exception):
    """The work ran past POSENC_REQUEST_TIMEOUT_S and was stopped: an overload, not bad input."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the request took longer than {seconds:g} s (POSENC_REQUEST_TIMEOUT_S) and was "
            "stopped; the service is busy, try again"
        )


class ClientGoneError(Exception):
    """The client disconnected; its work was stopped and nobody is waiting for an answer."""


def check_size(param: str, what: str, size: int, limit: int, setting: str) -> None:
    if size > limit:
        raise LimitError(
            param, f"{what} would hold {size} values, over the limit of {limit} ({setting})"
        )


def decide(settings: Settings, estimate: Estimate) -> None:
    """Refuse what can never be served: every limit is a view of the same estimate."""
    param, what = estimate.param, estimate.what
    check_size(param, what, estimate.values, settings.max_elements, "POSENC_MAX_ELEMENTS")
    if estimate.text:
        check_size(
            param, what, estimate.values, settings.max_text_elements, "POSENC_MAX_TEXT_ELEMENTS"
        )
    if estimate.cost.work > settings.max_work:
        raise LimitError(
            param,
            f"{what} would cost {estimate.cost.work} units of work, over the limit of "
            f"{settings.max_work} (POSENC_MAX_WORK)",
        )
    if estimate.cost.bytes > settings.memory_bytes:
        raise LimitError(
            param,
            f"{what} would need {estimate.cost.bytes} bytes of memory at once, over the whole "
            f"budget of {settings.memory_bytes} (POSENC_MEMORY_BYTES)",
        )


class Budget:
    """Bytes that admitted requests hold at once, handed out first come, first served.

    Lives on the event loop: reserve and release are never called from worker threads, so no
    lock is needed. Strict FIFO: a large request at the head is not starved by small ones.
    """

    def __init__(self, capacity: int, queue_length: int, wait_s: float) -> None:
        self.capacity = capacity
        self.queue_length = queue_length
        self.wait_s = wait_s
        self.held = 0
        self.admitted = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def reserve(self, nbytes: int) -> None:
        if not self._waiting and self.held + nbytes <= self.capacity:
            self._take(nbytes)
            return
        if len(self._waiting) >= self.queue_length:
            raise OverloadedError(f"{len(self._waiting)} requests already wait for memory")
        granted = asyncio.get_running_loop().create_future()
        entry = (nbytes, granted)
        self._waiting.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(granted), self.wait_s)
        except TimeoutError:
            self._give_up(entry)
            raise OverloadedError(
                f"{nbytes} bytes did not become free within {self.wait_s:g} s "
                f"(budget {self.capacity}, held {self.held})"
            ) from None
        except asyncio.CancelledError:
            self._give_up(entry)
            raise

    def release(self, nbytes: int) -> None:
        self.held -= nbytes
        self.admitted -= 1
        self._wake()

    def give_back(self, nbytes: int) -> None:
        """Part of a reservation returned early; the request still holds the rest."""
        self.held -= nbytes
        self._wake()

    def _give_up(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        nbytes, granted = entry
        if granted.done():
            self.release(nbytes)  # granted just as we gave up: hand it on
        else:
            granted.cancel()
            self._waiting.remove(entry)
            self._wake()  # we may have held smaller requests back

    def _take(self, nbytes: int) -> None:
        self.held += nbytes
        self.admitted += 1

    def _wake(self) -> None:
        while self._waiting and self.held + self._waiting[0][0] <= self.capacity:
            nbytes, granted = self._waiting.popleft()
            self._take(nbytes)
            granted.set_result(None)


@dataclass
class _Holding:
    budget: Budget
    reserved: list[int] = field(default_factory=list)


async def admit(request: Request, estimate: Estimate) -> None:
    """Decide, then reserve the estimate's bytes until this request's response is sent."""
    settings: Settings = request.app.state.settings
    decide(settings, estimate)
    holding: _Holding = request.scope[HOLDING]
    # What this request holds already (its body, being parsed) stays held while it waits: a
    # sum past the whole budget could never be granted, so it is refused now, not after a wait.
    held = sum(holding.reserved)
    if held and held + estimate.cost.bytes > holding.budget.capacity:
        raise LimitError(
            estimate.param,
            f"{estimate.what} would need {estimate.cost.bytes} bytes of memory beside the "
            f"{held} this request holds already, over the whole budget of "
            f"{holding.budget.capacity} (POSENC_MEMORY_BYTES)",
        )
    await holding.budget.reserve(estimate.cost.bytes)
    holding.reserved.append(estimate.cost.bytes)


def shrink_last(request: Request, nbytes: int) -> None:
    """Hand back what this request's latest reservation holds beyond ``nbytes``: a body sent
    without Content-Length reserved for the most it may be, and is now known."""
    holding: _Holding = request.scope[HOLDING]
    excess = holding.reserved[-1] - nbytes
    if excess > 0:
        holding.reserved[-1] = nbytes
        holding.budget.give_back(excess)


async def run(request: Request, work: Callable[..., Result], *args: Any) -> Result:
    """Run ``work`` in the bounded thread pool under the request's deadline and cancel token.

    The thread is never abandoned: on timeout or disconnect the token stops the work at its next
    checkpoint (≤ one chunk, ~50 ms), and only then does this return, so the reservation is
    released when the memory really is free.
    """
    settings: Settings = request.app.state.settings
    if request.app.state.limiter is None:
        request.app.state.limiter = anyio.CapacityLimiter(settings.threads)
    token = cancel.CancelToken(time.monotonic() + settings.request_timeout_s)
    spares = request.app.state.cache.spares

    def in_thread() -> Result:
        _yield_to_the_event_loop()
        # Large tables are written into the pages of tables gone (posenc.pages), lent by the
        # app's cache.
        with cancel.scope(token), pages.recycling(spares):
            token.check()  # it may have waited for a thread past its deadline
            return work(*args)

    outcome: list[Result] = []
    failures: list[Exception] = []
    # The task group would wrap the work's exceptions in a group; let them out plain instead.
    async with anyio.create_task_group() as watchers:
        watchers.start_soon(_watch, request, token, failures)
        try:
            outcome.append(
                await anyio.to_thread.run_sync(in_thread, limiter=request.app.state.limiter)
            )
        except Exception as failure:
            error = failure
        finally:
            watchers.cancel_scope.cancel()
    if failures:  # what stopped the work (a body past its limit) is the answer, not the stop
        raise failures[0]
    if outcome:
        return outcome[0]
    if isinstance(error, cancel.WorkCancelledError):
        if error.timed_out:
            raise RequestTimeoutError(settings.request_timeout_s) from None
        raise ClientGoneError from None
    raise error


# Worker threads run at this niceness: the event loop, at 0, wins the CPU at once when a
# request arrives (the kernel weighs nice 10 at a tenth of nice 0), so /healthz and cache hits
# do not wait for a time slice of a computation on the same core.
WORKER_NICENESS = 10
_worker = threading.local()


def _yield_to_the_event_loop() -> None:
    """Lower this worker thread's priority, once per thread (Linux: a thread's own nice)."""
    if getattr(_worker, "lowered", False):
        return
    _worker.lowered = True
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)


async def _watch(request: Request, token: cancel.CancelToken, failures: list[Exception]) -> None:
    """Stops the work when the client disconnects, when reading fails (a body streaming past its
    limit on a request that did not read it), or when the request itself is cancelled."""
    # Endpoints have read their bodies before they run work, so what arrives now is a
    # disconnect, the rest of an unread body, or the server saying the response is complete.
    try:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return
    except Exception as failure:
        failures.append(failure)
    finally:
        token.cancel()  # after the work has finished this changes nothing


class AdmissionMiddleware:
    """Gives each HTTP request a place to record its reservations, and releases them after the
    response has been sent — or the request failed, or the client went away."""

    def __init__(self, app: ASGIApp, budget: Budget) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        holding = _Holding(self.budget)
        scope[HOLDING] = holding
        try:
            await self.app(scope, receive, send)
        finally:
            for nbytes in holding.reserved:
                self.budget.release(nbytes)
