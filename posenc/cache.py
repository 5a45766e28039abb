"""A least-recently-used cache bounded by the bytes it holds, not by its entry count.

Tables differ in size by six orders of magnitude, so a count bound either wastes memory or
evicts everything at the first large table. Arrays are stored read-only down to the buffer
that owns their bytes and handed out as views, which cannot be made writable again: a caller
can never corrupt a cached table.

Why sharing them is safe, across threads and with the transport: every holder — a worker
thread, an npy or bin answer's memoryview (app/formats.py ``raw``), a replayed body
(app/replay.py) — holds a reference of its own, so eviction only drops the cache's and the
bytes live until the last holder is done (for a memoryview, until the server has written its
last byte); and no one can write them, so a body sent while other requests read the same
table goes out as it was computed. The lock guards the index and the byte count only.

The cache also lends room to the spare pages of tables it has let go (:mod:`posenc.pages`), at
most a quarter of its capacity: entries and spares together stay within it. Keeping a spare
evicts the least recently used entries (never the newest), and a new entry evicts entries
before spares, which are dropped only when the entries left cannot make its room: a stream of
distinct tables then keeps a spare of each size it turns over, at the price of a cache that
holds up to a quarter fewer entries. Values let go are released outside the lock, as their
last reference may offer their pages, which asks for the lock again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from posenc.pages import Spares


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


Value = TypeVar("Value", bound=Sized)


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    bytes: int
    entries: int
    capacity: int
    spare_bytes: int = 0
    spares_reused: int = 0
    lent: int = 0  # what the capacity counts of spares: spare_bytes, once no offer is under way


class ByteBoundedCache:
    """LRU mapping of keys to arrays (or anything with ``nbytes``), at most ``capacity`` bytes.

    >>> cache = ByteBoundedCache(capacity=16)
    >>> cache.get_or_compute("a", lambda: np.zeros(2)).flags.writeable
    False
    >>> cache.get_or_compute("b", lambda: np.zeros(1)).tolist()
    [0.0]
    >>> cache.get_or_compute("c", lambda: np.ones(1)).tolist(), cache.stats().entries
    ([1.0], 2)
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, Sized] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._lent = 0  # bytes of spare pages counted against the capacity
        self._lock = threading.Lock()
        self.spares = Spares(self)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Value]) -> Value:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return _handed_out(found)  # type: ignore[return-value]
            self._misses += 1
        # Computed outside the lock so a slow table never blocks hits on other keys; two
        # threads may race to compute the same key, and the second simply replaces the first.
        value = compute()
        if isinstance(value, np.ndarray):
            value = _read_only(value)  # type: ignore[assignment]
        self._store(key, value)
        return _handed_out(value)

    def get(self, key: Hashable) -> Sized | None:
        """The value under ``key`` if cached (counted as a hit), else None (not counted)."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return _handed_out(found)

    def holds(self, key: Hashable) -> bool:
        """Whether ``key`` is cached now (counted as neither a hit nor a miss)."""
        with self._lock:
            return key in self._entries

    def put(self, key: Hashable, value: Sized) -> None:
        """Store ``value`` (counted as a miss: it had to be made)."""
        with self._lock:
            self._misses += 1
        self._store(key, value)

    def _store(self, key: Hashable, value: Sized) -> None:
        size = value.nbytes
        if size > self.capacity:
            return
        let_go: list[Sized] = []
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous.nbytes
                let_go.append(previous)
            self._entries[key] = value
            self._bytes += size
            let_go += self._evict(self._bytes + self._lent - self.capacity, keep=1)
            over = self._bytes + self._lent > self.capacity
        while over and self.spares.drop_oldest():
            with self._lock:
                over = self._bytes + self._lent > self.capacity
        del let_go  # outside the lock (see the module's docstring)

    @property
    def spare_room(self) -> int:
        return self.capacity // 4

    def lend(self, nbytes: int) -> bool:
        """Count ``nbytes`` more of spare pages, evicting the oldest entries for them but never
        the newest; refused when that is not enough, or (never waiting: a table's last
        reference may go anywhere, this lock's holder included) when the lock is busy."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            excess = self._bytes + self._lent + nbytes - self.capacity
            if excess > 0 and self._bytes - self._newest_bytes() < excess:
                return False
            self._lent += nbytes
            let_go = self._evict(excess, keep=1)
        finally:
            self._lock.release()
        del let_go
        return True

    def repay(self, nbytes: int) -> None:
        with self._lock:
            self._lent -= nbytes

    def _newest_bytes(self) -> int:
        return self._entries[next(reversed(self._entries))].nbytes if self._entries else 0

    def _evict(self, excess: int, keep: int = 0) -> list[Sized]:
        """The oldest entries, taken out until ``excess`` bytes are freed (``keep`` newest
        stay), for the caller to let go once the lock is released."""
        evicted = []
        while excess > 0 and len(self._entries) > keep:
            _, value = self._entries.popitem(last=False)
            self._bytes -= value.nbytes
            excess -= value.nbytes
            evicted.append(value)
        return evicted

    def stats(self) -> CacheStats:
        with self._lock:
            stats = (self._hits, self._misses, self._bytes, len(self._entries), self.capacity)
            lent = self._lent
        return CacheStats(*stats, self.spares.nbytes, self.spares.reused, lent)


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array`` read-only down to the owner of its bytes. The flag of a view alone can be set
    back (NumPy allows ``writeable = True`` while the base is writable), and tables are views of
    the array their loops wrote (``out[0]``). A computation that went on writing into a buffer
    it returned a view of would fail at its next write, loudly, rather than change a cached
    table under a body being sent.

    Where that owner is not an array but pages (:mod:`posenc.pages`), NumPy would let the flag
    be set back all the same, the pages being writable: the answer is then ``array`` over a
    read-only memoryview of its owner, which keeps the owner alive and with it the pages."""
    owner = array
    owner.flags.writeable = False
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
        owner.flags.writeable = False
    if owner.base is None or not owner.flags.c_contiguous:
        return array  # the owner is an array: frozen, it holds every view read-only
    sealed = np.frombuffer(memoryview(owner), dtype=np.uint8)
    offset = array.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return np.ndarray(array.shape, array.dtype, sealed, offset, array.strides)


def _handed_out(value: Value) -> Value:
    return value.view() if isinstance(value, np.ndarray) else value
