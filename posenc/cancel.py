"""Cooperative cancellation: long computations stop once their answer is no longer wanted.

The caller runs the work inside :func:`scope` with a :class:`CancelToken`; the core calls
:func:`checkpoint` between chunks of bounded size. When the token is cancelled (the client went
away) or its deadline passes, the next checkpoint raises :class:`WorkCancelledError`, so the
work stops within one chunk instead of running on after its answer was given up.

A thread cannot be interrupted from outside, which is why the check is cooperative; a context
variable carries the token so that the maths does not take a ``token`` argument at every level.

>>> token = CancelToken()
>>> with scope(token):
...     checkpoint()  # nothing happens: still wanted
...     token.cancel()
...     checkpoint()
Traceback (most recent call last):
...
posenc.cancel.WorkCancelledError: the work was cancelled
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class WorkCancelledError(Exception):
    """Raised at a checkpoint once the work's token is cancelled or past its deadline."""

    def __init__(self, timed_out: bool) -> None:
        super().__init__(
            "the work ran past its deadline" if timed_out else "the work was cancelled"
        )
        self.timed_out = timed_out


class CancelToken:
    """A flag another thread may set, and an optional deadline on ``time.monotonic()``."""

    __slots__ = ("_cancelled", "deadline")

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self._cancelled = False

    def cancel(self) -> None:
        # A plain attribute write is atomic under the GIL and free-threaded builds alike.
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def check(self) -> None:
        if self._cancelled:
            raise WorkCancelledError(timed_out=False)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise WorkCancelledError(timed_out=True)


_current: ContextVar[CancelToken | None] = ContextVar("posenc_cancel_token", default=None)


@contextmanager
def scope(token: CancelToken) -> Iterator[CancelToken]:
    """Make ``token`` the one that :func:`checkpoint` consults in this context."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


def checkpoint() -> None:
    """Raise :class:`WorkCancelledError` if the current work is no longer wanted.

    Costs a context-variable read and a clock read: call it once per chunk, not per element.
    """
    token = _current.get()
    if token is not None:
        token.check()
