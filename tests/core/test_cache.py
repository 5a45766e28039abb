from __future__ import annotations

import numpy as np
import pytest

from posenc import ByteBoundedCache


def test_cache_evicts_the_least_recently_used_until_it_fits() -> None:
    cache = ByteBoundedCache(capacity=3 * 800)
    for key in "abc":
        cache.get_or_compute(key, lambda: np.zeros(100))
    cache.get_or_compute("a", lambda: pytest.fail("a was evicted"))
    cache.get_or_compute("d", lambda: np.zeros(100))
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.hits, stats.misses) == (3, 2400, 1, 4)
    recomputed = []
    cache.get_or_compute("b", lambda: recomputed.append(1) or np.zeros(100))
    assert recomputed == [1]


def test_cache_never_holds_more_than_its_capacity() -> None:
    cache = ByteBoundedCache(capacity=1000)
    cache.get_or_compute("big", lambda: np.zeros(200))
    assert cache.stats().bytes == 0
    for key in range(50):
        cache.get_or_compute(key, lambda: np.zeros(30))
        assert cache.stats().bytes <= 1000


def test_arrays_handed_out_cannot_be_made_writable() -> None:
    cache = ByteBoundedCache(capacity=10_000)
    view = cache.get_or_compute("t", lambda: np.arange(4.0))
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 1.0
    with pytest.raises(ValueError, match="cannot set WRITEABLE"):
        view.flags.writeable = True
    again: np.ndarray = cache.get_or_compute("t", lambda: pytest.fail("recomputed"))
    assert again.tolist() == [0.0, 1.0, 2.0, 3.0]
