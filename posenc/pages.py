"""Memory for a large table: the pages of a table nobody holds any more, else fresh ones.

A cold table paid ~0.35 ms per MiB for new pages on the benchmarks' VM (the kernel zeroing and
mapping each one), a third of its time, where the float32 recipe run in a loop pays nothing:
its allocator hands it the memory it freed. A served table is never freed that way; it lives
in the cache, then in replayed bodies and answers being sent, and when its last holder lets go
its memory goes back to the kernel (``MALLOC_MMAP_THRESHOLD_``, as the image sets it).

Here a table's buffer is an anonymous mapping whose pages, once the last array or memoryview
on them is gone, are kept as a *spare*, and the next table of the same byte size is written
into them. Nothing can still read a spare: it is offered only by the finalizer of the one
object every view of the table refers to. Spares are lent by a :class:`Lender` (the cache):
they count against its capacity, so memory is never held beyond what it would hold anyway.

Which spares a table may take is the caller's context (:func:`recycling`): the service's
worker threads recycle through their app's cache; anything else gets fresh pages, as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import mmap
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

# Below this a table's pages cost less than keeping track of them (and NumPy's own small-block
# cache already reuses them).
RECYCLED_FROM = 2**20


class Lender(Protocol):
    """Who counts the spares: the room they may take, and the bytes they hold against it."""

    @property
    def spare_room(self) -> int: ...

    def lend(self, nbytes: int) -> bool:
        """Count ``nbytes`` more (fewer, if negative) of spares; False, counting nothing, if
        that cannot be done at once. Never waits: a table's last reference may go anywhere."""
        ...

    def repay(self, nbytes: int) -> None:
        """Those bytes are no longer spare."""


class Spares:
    """Buffers of tables gone, by byte size, the sizes least recently offered first; their
    bytes counted by ``lender`` and kept within its ``spare_room``."""

    def __init__(self, lender: Lender) -> None:
        self.lender = lender
        self._kept: OrderedDict[int, list[mmap.mmap]] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0  # of the spares kept now
        self.reused = 0  # tables written into a spare's pages

    def empty(self, shape: tuple[int, ...], dtype: str) -> tuple[npt.NDArray[Any], bool]:
        """``np.empty(shape, dtype)`` in a spare's pages if one is this size (and True), else in
        new ones."""
        count = math.prod(shape)
        nbytes = count * np.dtype(dtype).itemsize
        pages = self._take(nbytes)
        recycled = pages is not None
        if pages is None:
            # Private: a process forked after (multiprocessing, a preloading server) gets its own
            # copy on write, never a table another process recycles (the default is shared).
            pages = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        # Every view of the table keeps this array as its base (NumPy stops at the first array
        # whose base is not one), and so does every memoryview of a view: it dies with the last
        # of them, and only then are its pages offered for another table.
        owner = np.frombuffer(pages, dtype=dtype, count=count)
        address = owner.ctypes.data
        _traced().PyTraceMalloc_Track(_TRACED_AS, address, nbytes)
        weakref.finalize(owner, self._offer, pages, address).atexit = False
        return owner.reshape(shape), recycled

    def drop_oldest(self) -> int:
        """Unmap the spare offered longest ago; the bytes freed (0: none was kept)."""
        with self._lock:
            pages = self._pop_oldest() if self._kept else None
        if pages is None:
            return 0
        self.lender.repay(len(pages))
        return len(pages)  # unmapped once the last export of them is released: now, or soon

    def _take(self, nbytes: int) -> mmap.mmap | None:
        with self._lock:
            kept = self._kept.get(nbytes)
            if not kept:
                return None
            pages = kept.pop()
            if not kept:
                del self._kept[nbytes]
            self.nbytes -= nbytes
            self.reused += 1
        self.lender.repay(nbytes)
        return pages

    def _offer(self, pages: mmap.mmap, address: int) -> None:
        """The table on ``pages`` is gone: keep them, dropping the oldest spares if the room
        asks for it. Refused (a lock busy, the room too small), they are unmapped as soon as
        the owner's export of them is released, right after this."""
        _traced().PyTraceMalloc_Untrack(_TRACED_AS, address)  # a spare is no table's: untraced
        nbytes = len(pages)
        if nbytes > self.lender.spare_room or not self._lock.acquire(blocking=False):
            return
        try:
            dropped = self._oldest_to_drop(nbytes)
            # The entries lend evicts for this spare are let go while this lock is held: their
            # own pages find it busy and are unmapped, not kept (one spare per offer).
            if not self.lender.lend(nbytes - sum(dropped)):
                return
            # Dropped, they are unmapped with the last export of them: at once, or (a gone
            # table's own, offered in the same garbage collection) when its owner is cleared.
            for _ in dropped:
                self._pop_oldest()
            self._kept.setdefault(nbytes, []).append(pages)
            self._kept.move_to_end(nbytes)
            self.nbytes += nbytes
        finally:
            self._lock.release()

    def _oldest_to_drop(self, nbytes: int) -> list[int]:
        """The sizes of the oldest spares to drop for room for ``nbytes`` more."""
        excess = self.nbytes + nbytes - self.lender.spare_room
        sizes: list[int] = []
        for size, kept in self._kept.items():
            for _ in kept:
                if excess <= 0:
                    return sizes
                sizes.append(size)
                excess -= size
        return sizes

    def _pop_oldest(self) -> mmap.mmap:
        nbytes, kept = next(iter(self._kept.items()))
        pages = kept.pop(0)
        if not kept:
            del self._kept[nbytes]
        self.nbytes -= nbytes
        return pages


# tracemalloc sees a table's pages as it sees NumPy's own buffers (NumPy's domain), taken when
# the table is made and let go with it, so a test of what a request allocates counts them.
_TRACED_AS = 389047


@lru_cache(maxsize=1)
def _traced() -> Any:
    import ctypes  # once a table this large is made, as posenc.numerics.exact does

    api = ctypes.pythonapi
    api.PyTraceMalloc_Track.argtypes = [ctypes.c_uint, ctypes.c_size_t, ctypes.c_size_t]
    api.PyTraceMalloc_Untrack.argtypes = [ctypes.c_uint, ctypes.c_size_t]
    return api


_recycler: contextvars.ContextVar[Spares | None] = contextvars.ContextVar(
    "posenc_spares", default=None
)


@contextlib.contextmanager
def recycling(spares: Spares) -> Iterator[None]:
    """Large tables made in this context take (and leave) their pages in ``spares``."""
    token = _recycler.set(spares)
    try:
        yield
    finally:
        _recycler.reset(token)


def empty(shape: tuple[int, ...], dtype: str) -> tuple[npt.NDArray[Any], bool]:
    """``np.empty(shape, dtype)``, and whether its pages are a spare's (already in place): from
    the context's spares for a table of :data:`RECYCLED_FROM` bytes up."""
    spares = _recycler.get()
    if spares is None or math.prod(shape) * np.dtype(dtype).itemsize < RECYCLED_FROM:
        return np.empty(shape, dtype=dtype), False
    return spares.empty(shape, dtype)
