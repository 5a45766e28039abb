"""What the cache hands out stays as computed: no holder can write it, and eviction does not
take it from a holder (an npy answer being sent is one)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from posenc.cache import ByteBoundedCache
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal.params import SinusoidalParams


def test_a_cached_view_of_a_writable_buffer_cannot_be_made_writable_again() -> None:
    # Tables are views of the array their loops wrote: out[0] of a (1, rows, columns) buffer.
    owner = np.zeros((1, 3, 4))
    owner[0] = np.arange(12.0).reshape(3, 4)
    cache = ByteBoundedCache(capacity=1024)
    handed = cache.get_or_compute("t", lambda: owner[0])
    for array in (handed, cache.get_or_compute("t", lambda: owner[1:])):
        with pytest.raises(ValueError, match="WRITEABLE"):
            array.flags.writeable = True
    # The owner too (only the computation held it): no write through it either.
    with pytest.raises(ValueError, match="read-only"):
        owner[0, 0, 0] = -1.0
    assert handed.tolist() == np.arange(12.0).reshape(3, 4).tolist()


def test_a_served_table_cannot_be_made_writable_through_the_cache() -> None:
    cache = ByteBoundedCache(capacity=2**20)
    params = SinusoidalParams(d_model=6)
    table = cache.get_or_compute("s", lambda: sinusoidal.table(params, 5, 0, "float32"))
    with pytest.raises(ValueError, match="WRITEABLE"):
        table.flags.writeable = True


def test_a_handed_out_array_and_a_view_of_its_bytes_outlive_its_eviction() -> None:
    params = SinusoidalParams(d_model=64)
    cache = ByteBoundedCache(capacity=64 * 64 * 4)
    held = cache.get_or_compute("a", lambda: sinusoidal.table(params, 64, 0, "float32"))
    sent = held.data.cast("B")  # what an npy answer hands the transport
    expected = sinusoidal.table(params, 64, 0, "float32").tobytes()
    for offset in range(1, 9):  # each evicts the one before: the first is long gone
        cache.get_or_compute(offset, partial(sinusoidal.table, params, 64, offset, "float32"))
    assert cache.get("a") is None
    assert bytes(sent) == expected
