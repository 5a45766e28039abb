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
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np


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
        self._lock = threading.Lock()

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
            _freeze(value)
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
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous.nbytes
            self._entries[key] = value
            self._bytes += size
            while self._bytes > self.capacity:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self._hits, self._misses, self._bytes, len(self._entries), self.capacity
            )


def _freeze(array: np.ndarray) -> None:
    """Read-only down to the owner of the bytes. The flag of a view alone can be set back
    (NumPy allows ``writeable = True`` while the base is writable), and tables are views of
    the array their loops wrote (``out[0]``). A computation that went on writing into a buffer
    it returned a view of would fail at its next write, loudly, rather than change a cached
    table under a body being sent."""
    base: object = array
    while isinstance(base, np.ndarray):
        base.flags.writeable = False
        base = base.base


def _handed_out(value: Value) -> Value:
    return value.view() if isinstance(value, np.ndarray) else value
