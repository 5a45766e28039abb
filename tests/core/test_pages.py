"""Spare pages (posenc.pages): a table is written into a gone table's pages only once nothing
can read them, the tables made there are the same bits, and the spares stay within the room
the cache lends them."""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import numpy as np
import pytest

from posenc import pages
from posenc.cache import ByteBoundedCache
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal.params import SinusoidalParams

MiB = 2**20
SINUSOID = SinusoidalParams(d_model=512)  # 512 rows: 1 MiB of float32, the least recycled


def _table(offset: int, rows: int = 512) -> np.ndarray:
    return sinusoidal.table(SINUSOID, rows, offset, "float32")


def _in(cache: ByteBoundedCache, make: Callable[[], Any]) -> Any:
    with pages.recycling(cache.spares):
        return make()


def _cached(cache: ByteBoundedCache, key: int, rows: int = 512) -> Any:
    return _in(cache, partial(cache.get_or_compute, key, partial(_table, key, rows)))


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def test_a_table_gone_lends_its_pages_to_the_next_of_its_size() -> None:
    cache = ByteBoundedCache(capacity=16 * MiB)
    first = _in(cache, lambda: _table(0))
    where = _address(first)
    del first
    assert cache.stats().spare_bytes == MiB
    second = _in(cache, lambda: _table(7))
    assert _address(second) == where
    assert cache.stats().spares_reused == 1 and cache.stats().spare_bytes == 0
    assert second.tobytes() == _table(7).tobytes()  # the same bits as in new pages


def test_pages_a_holder_still_reads_are_never_lent() -> None:
    # Every holder the service has: a view (a cached table handed out), a memoryview of its
    # bytes (an npy answer being sent), a slice of one plane (rope's cos of cos_sin).
    cache = ByteBoundedCache(capacity=64 * MiB)
    tables = [_in(cache, partial(_table, k)) for k in range(3)]
    expected = [table.tobytes() for table in tables]
    holders: list[Any] = [tables[0].view(), tables[1].data.cast("B"), tables[2][100:200]]
    del tables
    gc.collect()
    assert cache.stats().spare_bytes == 0
    later = [_in(cache, partial(_table, 1000 + k)) for k in range(3)]
    assert cache.stats().spares_reused == 0
    assert holders[0].tobytes() == expected[0]
    assert bytes(holders[1]) == expected[1]
    assert (
        holders[2].tobytes()
        == np.frombuffer(expected[2], np.float32).reshape(512, 512)[100:200].tobytes()
    )
    del holders
    assert cache.stats().spare_bytes == 3 * MiB
    assert all(table.tobytes() == _table(1000 + k).tobytes() for k, table in enumerate(later))


def test_a_table_evicted_from_the_cache_lends_its_pages_once_its_last_holder_lets_go() -> None:
    cache = ByteBoundedCache(capacity=8 * MiB)  # room for 2 MiB of spares
    held = _in(cache, lambda: cache.get_or_compute("a", lambda: _table(0)))
    for offset in range(1, 16):  # each 1 MiB: "a" is evicted long before the end
        _cached(cache, offset)
    assert cache.get("a") is None
    assert cache.stats().spares_reused > 0  # later tables took what the cache let go
    assert held.tobytes() == _table(0).tobytes()  # not the one still held


def test_spares_and_entries_stay_within_the_capacity() -> None:
    capacity = 8 * MiB
    cache = ByteBoundedCache(capacity=capacity)
    for k in range(40):
        size = 512 * (1 + k % 3)  # 1, 2 and 3 MiB tables: spares of three sizes compete
        _cached(cache, k, size)
        stats = cache.stats()
        assert stats.spare_bytes <= capacity // 4
        assert stats.bytes + stats.spare_bytes <= capacity
        assert stats.lent == stats.spare_bytes  # nothing counted that is not kept, or kept twice
    while cache.spares.drop_oldest():
        pass
    assert cache.stats().lent == 0  # every spare repaid: the entries have the whole room again


def test_an_entry_that_needs_the_spares_room_takes_it() -> None:
    cache = ByteBoundedCache(capacity=4 * MiB)
    for offset in range(5):  # the fifth evicts the first, whose pages evict the second
        _cached(cache, offset)
    assert cache.stats().spare_bytes == MiB
    whole = cache.get_or_compute("big", lambda: np.zeros(4 * MiB // 8))  # the whole capacity
    assert cache.stats().spare_bytes == 0 and cache.get("big") is not None
    assert whole.nbytes == 4 * MiB


def test_recycled_rope_tables_are_the_same_bits_as_new_ones_and_streamed_ones() -> None:
    params = RopeParams(d_model=128, base=31250.5)
    cache = ByteBoundedCache(capacity=32 * MiB)
    reported: list[int] = []
    for offset in (0, 2**31 - 4096, 123_457):
        made = _in(
            cache,
            partial(
                rope.table,
                params,
                4096,
                offset,
                "float32",
                finished=lambda _, r: reported.append(r),
            ),
        )
        assert made.tobytes() == rope.table(params, 4096, offset, "float32").tobytes()
        del made
    assert cache.stats().spares_reused == 2 and reported[-1] == 4096


def test_outside_a_recycling_context_tables_get_numpy_pages() -> None:
    table, in_place = pages.empty((512, 512), "float32")
    assert table.flags.owndata and not in_place


@pytest.mark.parametrize("nbytes", [pages.RECYCLED_FROM - 4, 4096])
def test_small_tables_are_left_to_numpy(nbytes: int) -> None:
    cache = ByteBoundedCache(capacity=16 * MiB)
    with pages.recycling(cache.spares):
        small, in_place = pages.empty((nbytes // 4,), "float32")
    assert small.flags.owndata and not in_place


def test_threads_making_and_dropping_tables_at_once_read_only_their_own() -> None:
    from concurrent.futures import ThreadPoolExecutor

    cache = ByteBoundedCache(capacity=12 * MiB)

    def work(worker: int) -> bool:
        right = True
        for round_ in range(12):
            offset = 1000 * worker + round_
            with pages.recycling(cache.spares):
                table = cache.get_or_compute(offset, partial(_table, offset))
            right &= table.tobytes() == _table(offset).tobytes()
        return right

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(4)))
    stats = cache.stats()
    assert stats.spares_reused > 0
    assert stats.bytes + stats.spare_bytes <= 12 * MiB


def test_a_table_in_spare_pages_is_as_read_only_in_the_cache_as_any() -> None:
    cache = ByteBoundedCache(capacity=16 * MiB)
    _in(cache, lambda: _table(0))  # let go at once: its pages become a spare
    handed = _in(cache, lambda: cache.get_or_compute("t", lambda: _table(5)))
    assert cache.stats().spares_reused == 1
    with pytest.raises(ValueError, match="WRITEABLE"):
        handed.flags.writeable = True
    with pytest.raises(ValueError, match="read-only"):
        handed[0, 0] = -1.0


def _poisoned(cache: ByteBoundedCache, nbytes: int) -> None:
    """A spare of ``nbytes`` whose every byte is 0xFF (a NaN in every float)."""
    with pages.recycling(cache.spares):
        junk, _ = cache.spares.empty((nbytes,), "uint8")
    junk[:] = 0xFF
    del junk


def _owned_bytes(table: np.ndarray) -> int:
    owner = table
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    return int(owner.nbytes)


SINUSOIDS: list[tuple[int, Literal["split", "interleaved"], Literal["float32", "float64"], int]] = [
    (511, "split", "float32", 517),  # past 1 MiB by a few rows, of odd widths: not page-sized
    (513, "interleaved", "float64", 259),
    (1023, "interleaved", "float32", 260),
]
ROPES: list[tuple[RopeParams, str, Literal["float32", "float64"]]] = [
    (RopeParams(d_model=130, layout="split"), "cos_sin", "float32"),
    (RopeParams(d_model=128, rotary_pairs=20), "sin", "float32"),
    (RopeParams(d_model=128, layout="interleaved"), "cos", "float64"),
]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    "make",
    [
        *(
            partial(sinusoidal.table, SinusoidalParams(d_model=d, layout=layout), rows, 5, dtype)
            for d, layout, dtype, rows in SINUSOIDS
        ),
        *(partial(rope.table, p, 2053, 1000, dtype, c) for p, c, dtype in ROPES),
    ],
)
def test_every_byte_of_a_table_in_a_spare_is_written(make: Any, streamed: bool) -> None:
    cache = ByteBoundedCache(capacity=64 * MiB)
    extra = {"finished": lambda _, rows: None} if streamed else {}
    fresh = make(**extra)
    _poisoned(cache, _owned_bytes(fresh))
    with pages.recycling(cache.spares):
        recycled = make(**extra)
    assert cache.stats().spares_reused == 1
    assert recycled.tobytes() == fresh.tobytes()


def test_tracemalloc_sees_a_tables_pages_while_it_lives_and_not_as_a_spare() -> None:
    import tracemalloc

    cache = ByteBoundedCache(capacity=16 * MiB)
    _in(cache, partial(_table, 0, 1024))  # what a first table imports is not its pages
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        table = _in(cache, partial(_table, 0))
        assert tracemalloc.get_traced_memory()[0] - before >= MiB
        del table
        assert tracemalloc.get_traced_memory()[0] - before < MiB // 8
        again = _in(cache, partial(_table, 1))  # in the spare: counted again
        assert cache.stats().spares_reused == 1
        assert tracemalloc.get_traced_memory()[0] - before >= MiB
        del again
    finally:
        tracemalloc.stop()
