"""The compiled loops stay inside their buffers: run with numba's bounds checks on, and refused
at the Python boundary where a loop could not see the size it writes to."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from posenc.numerics import kernels
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import Layout, RopeParams
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal.params import SinusoidalParams

ROOT = Path(__file__).resolve().parents[2]

# Tables where the rotation finds more values near zero in one call than 2h (row 0's sines
# are all zero, and with a large base most frequencies stay below 2^-10 for many rows), at
# widths past 4096 where those no longer fit the old exact buffer: before the fix each wrote
# up to 2h float64 values past the end of a heap block (issue 20's segfault). Also the odd
# and split layouts, every rope component, and two threads.
CASES = """
from posenc.schemes.rope import maths as rope
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.sinusoidal.params import SinusoidalParams
cases = [
    (rope.table, rope.table_reference, RopeParams(d_model=8192, base=1e9), "cos_sin"),
    (rope.table, rope.table_reference, RopeParams(d_model=8192, base=1e12), "sin"),
    (rope.table, rope.table_reference,
     RopeParams(d_model=8194, base=1e12, layout="interleaved"), "cos"),
]
for d_model, layout in ((8193, "interleaved"), (8193, "split"), (9000, "split")):
    params = SinusoidalParams(d_model=d_model, base=1e12, layout=layout)
    cases.append((sinusoidal.table, sinusoidal.table_reference, params, None))
"""

CHECK = """
import numpy as np
from posenc.schemes.sinusoidal import maths as sinusoidal
for fast, reference, params, component in cases:
    for dtype in ("float32", "float64"):
        extra = () if component is None else (component,)
        got = fast(params, 24, 0, dtype, *extra)
        want = reference(params, 24, 0, dtype, *extra)
        assert got.tobytes() == want.tobytes(), (params, dtype, component)
params = SinusoidalParams(d_model=6, layout="split")
got = sinusoidal.table(params, 3 * 256 + 5, 7, "float32", threads=2)
assert got.tobytes() == sinusoidal.table_reference(params, 3 * 256 + 5, 7, "float32").tobytes()
print("in bounds")
"""


def test_wide_tables_with_many_values_near_zero_stay_in_bounds_under_numbas_checks(
    tmp_path: Path,
) -> None:
    # A cache directory of its own: numba's cache is not keyed by NUMBA_BOUNDSCHECK, so loops
    # compiled without the checks (by any earlier run) would be loaded and run unchecked.
    env = {
        **os.environ,
        "NUMBA_BOUNDSCHECK": "1",
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
        "PYTHONFAULTHANDLER": "1",
    }
    script = textwrap.dedent(CASES) + textwrap.dedent(CHECK)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    # An out-of-bounds index is an IndexError here; without the checks it was heap corruption
    # ("free(): invalid next size", SIGABRT or SIGSEGV), so the exit code is asserted either way.
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == "in bounds"


def test_the_exact_buffers_refuse_more_values_than_they_hold() -> None:
    turns = sinusoidal.frequencies_of(SinusoidalParams(d_model=8))
    exact = kernels._Exact(turns, 8)
    with pytest.raises(IndexError, match="9 exact values"):
        exact.codes(0, np.arange(9, dtype=np.int64))
    with pytest.raises(IndexError, match="12 exact values"):
        exact.grid(0, 3)  # 3 rows of 4 frequencies
    s, _ = exact.grid(0, 2)
    assert s.shape == (8,)


@pytest.mark.parametrize(
    ("shape", "store"),
    [
        ((1, 4, 9), kernels.Store(kernels.SIN_COS_INTERLEAVED, cosines=4)),  # a column too many
        ((1, 4, 7), kernels.Store(kernels.SIN_COS_INTERLEAVED, cosines=4)),  # one too few
        ((1, 4, 7), kernels.Store(kernels.SIN_COS_SPLIT, cosines=4)),
        ((4, 8), kernels.Store(kernels.SIN_COS_SPLIT, cosines=4)),  # not (planes, rows, columns)
        ((1, 4, 8), kernels.Store(kernels.ROPE_SPLIT, 4, sin_plane=1, cos_plane=0)),  # 2 planes
        ((2, 4, 8), kernels.Store(kernels.ROPE_SPLIT, 4, sin_plane=-1, cos_plane=0)),  # 1 plane
        ((1, 4, 8), kernels.Store(kernels.ROPE_INTERLEAVED, 3, sin_plane=0, cos_plane=-1)),
        ((1, 4, 8), kernels.Store(kernels.SIN_COS_SPLIT, cosines=5)),  # more cosines than h
    ],
)
def test_an_output_that_is_not_exactly_what_the_store_writes_is_refused(
    shape: tuple[int, ...], store: kernels.Store
) -> None:
    turns = sinusoidal.frequencies_of(SinusoidalParams(d_model=8))
    out = np.zeros(shape, dtype=np.float32)
    for fill in (kernels.rotated_table, kernels.exact_table):
        with pytest.raises(ValueError, match=r"does not match|every frequency"):
            fill(out, 0, turns, store)
    assert not out.any()


def test_every_output_the_schemes_build_is_accepted() -> None:
    # The check above must not refuse the real callers: odd and even widths, every layout.
    for d_model in (1, 2, 7, 8):
        for layout in ("interleaved", "split"):
            params = SinusoidalParams(d_model=d_model, layout=layout)
            assert sinusoidal.table(params, 3, 0, "float32").shape == (3, d_model)
    layouts: tuple[Layout, ...] = ("interleaved", "split")
    for component in ("cos_sin", "cos", "sin"):
        for layout in layouts:
            rotary = RopeParams(d_model=6, layout=layout)
            assert np.isfinite(rope.table(rotary, 3, 0, "float32", component)).all()
