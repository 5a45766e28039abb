"""Compile the table loops ahead of the first request (an image build calls this).

numba compiles a loop for each combination of array types it meets; computing one tiny table
of each kind meets them all and leaves the machine code in ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

from posenc.rope import RopeParams
from posenc.rope import table as rope_table
from posenc.sinusoidal import SinusoidalParams
from posenc.sinusoidal import table as sinusoidal_table


def compile_kernels() -> None:
    for dtype in ("float32", "float64"):
        for layout in ("interleaved", "split"):
            sinusoidal_table(SinusoidalParams(d_model=6, layout=layout), 300, dtype=dtype)
            for component in ("cos_sin", "cos", "sin"):
                rope_table(RopeParams(d_model=6, layout=layout), 300, 0, dtype, component)
