"""The compiled table loops against the NumPy reference, bit for bit, and their limits."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from posenc.cancel import CancelToken, WorkCancelledError, scope
from posenc.numerics import kernels, rotation
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.scaling import scaled
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal.params import DType, Layout, SinusoidalParams

TOP = 2**31 - 1


def same_bits(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize(
    ("d_model", "seq_len", "offset", "base"),
    [(512, 700, 0, 1e4), (7, 600, 12345, 1e4), (64, 513, TOP - 512, 1e12), (1, 300, 5, 2.0)],
)
def test_sinusoid_tables_equal_the_numpy_reference_bit_for_bit(
    dtype: DType, layout: Layout, d_model: int, seq_len: int, offset: int,
    base: float,
) -> None:  # fmt: skip
    params = SinusoidalParams(d_model=d_model, base=base, layout=layout)
    fast = sinusoidal.table(params, seq_len, offset, dtype)
    assert same_bits(fast, sinusoidal.table_reference(params, seq_len, offset, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("component", ["cos_sin", "cos", "sin"])
@pytest.mark.parametrize(
    "params",
    [
        RopeParams(d_model=128),
        RopeParams(d_model=64, layout="interleaved", base=1e12),
        RopeParams(d_model=16, scaling="yarn", factor=4.0, original_max_position_embeddings=100),
    ],
    ids=["split", "interleaved", "yarn"],
)
def test_rope_tables_equal_the_numpy_reference_bit_for_bit(
    dtype: str, component: str, params: RopeParams
) -> None:
    for offset in (0, TOP - 299):
        fast = rope.table(params, 300, offset, dtype, component)
        assert same_bits(fast, rope.table_reference(params, 300, offset, dtype, component))


def test_rope_encode_of_consecutive_positions_is_the_table() -> None:
    params = RopeParams(d_model=32)
    positions = np.arange(1000, 1400, dtype=np.int64)
    assert same_bits(rope.encode(params, positions, "float32"), rope.table(params, 400, 1000))


def test_threads_split_the_rows_without_changing_a_bit() -> None:
    params = SinusoidalParams(d_model=96, layout="split")
    one = sinusoidal.table(params, 2000, 77, "float32", threads=1)
    assert same_bits(sinusoidal.table(params, 2000, 77, "float32", threads=2), one)
    rope_params = RopeParams(d_model=32)
    assert same_bits(
        rope.table(rope_params, 1000, 5, "float64", threads=3),
        rope.table(rope_params, 1000, 5, "float64"),
    )


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scheme", ["sinusoidal", "rope"])
def test_the_rows_reported_finished_are_final(scheme: str, dtype: DType, threads: int) -> None:
    """What a streamed answer sends (app/streaming.py) when told: each report's rows, copied
    as it is made, are the finished table's, reports only grow, and the last names every row;
    the bits are those of a table computed without reports."""
    reports: list[tuple[int, bytes]] = []
    buffers: set[int] = set()

    def finished(out: npt.NDArray[Any], rows: int) -> None:
        buffers.add(out.ctypes.data)
        reports.append((rows, out[:, :rows].tobytes()))

    rows = 20_000  # several calls of the loops (kernels._REPORTED_CALL) in each thread
    if scheme == "rope":
        params = RopeParams(d_model=128)
        table = rope.table(params, rows, 321, dtype, "cos_sin", threads, finished=finished)
        plain = rope.table(params, rows, 321, dtype, "cos_sin", threads)
        planes = table
    else:
        sinusoid = SinusoidalParams(d_model=256)
        table = sinusoidal.table(sinusoid, rows, 321, dtype, threads, finished=finished)
        plain = sinusoidal.table(sinusoid, rows, 321, dtype, threads)
        planes = table[None]
    assert same_bits(table, plain)
    assert buffers == {table.ctypes.data}  # the rows reported are the answer's own memory
    counts = [count for count, _ in reports]
    assert len(counts) > 4 and counts == sorted(counts) and counts[-1] == rows
    for count, seen in reports:
        assert seen == planes[:, :count].tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_cancelled_table_stops_at_its_next_checkpoint(dtype: DType) -> None:
    token = CancelToken(deadline=time.monotonic() - 1)
    with scope(token), pytest.raises(WorkCancelledError):
        sinusoidal.table(SinusoidalParams(d_model=64), 1024, 0, dtype, threads=2)


@pytest.mark.parametrize("layout", ["interleaved", "split"])
def test_a_float32_table_needs_at_most_a_quarter_more_than_its_bytes(
    layout: Layout,
) -> None:
    params = SinusoidalParams(d_model=512, layout=layout)
    sinusoidal.table(params, 16, 0, "float32")  # frequencies and twiddles: cached once
    tracemalloc.start()
    try:
        out = sinusoidal.table(params, 2048, 10**6, "float32")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 1.25 * out.nbytes


def _cold_peak(compute: Any) -> tuple[int, npt.NDArray[Any]]:
    for cache in (sinusoidal.frequencies, scaled, kernels._twiddles):
        cache.cache_clear()
    rotation._conjugate_twiddles.cache_clear()
    tracemalloc.start()
    try:
        out = compute()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("params", "seq_len", "dtype", "threads"),
    [
        (SinusoidalParams(d_model=512), 2048, "float32", 1),
        (SinusoidalParams(d_model=512, layout="split"), 2048, "float32", 2),
        (SinusoidalParams(d_model=256), 1000, "float64", 2),
        (SinusoidalParams(d_model=65536, base=1e12), 3, "float32", 1),
        (SinusoidalParams(d_model=1), 5000, "float32", 1),
        (SinusoidalParams(d_model=2, base=1e12), 1, "float64", 1),
        (SinusoidalParams(d_model=300, base=1e12), 600, "float16", 1),
        (SinusoidalParams(d_model=31, convention="fairseq"), 700, "float32", 1),
    ],
)
def test_a_sinusoid_table_stays_within_its_declared_memory(
    params: SinusoidalParams, seq_len: int, dtype: DType, threads: int
) -> None:
    peak, out = _cold_peak(lambda: sinusoidal.table(params, seq_len, 10**6, dtype, threads))
    assert out.nbytes <= peak <= sinusoidal.table_cost(params, seq_len, dtype, threads).bytes


@pytest.mark.parametrize(
    ("params", "seq_len", "dtype", "component"),
    [
        (RopeParams(d_model=128), 8192, "float32", "cos_sin"),
        (RopeParams(d_model=128, layout="interleaved"), 3000, "float64", "cos"),
        (RopeParams(d_model=4096, base=1e12), 3, "float32", "sin"),
        (RopeParams(d_model=64), 700, "float16", "cos_sin"),
        (RopeParams(d_model=64), 700, "float32", "angle"),
    ],
)
def test_a_rope_table_stays_within_its_declared_memory(
    params: RopeParams, seq_len: int, dtype: str, component: str
) -> None:
    peak, out = _cold_peak(lambda: rope.table(params, seq_len, 10**6, dtype, component))
    assert out.nbytes <= peak <= rope.table_cost(params, seq_len, dtype, component).bytes
