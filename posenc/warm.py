"""Compile the table loops ahead of the first request (an image build calls this).

numba compiles a loop for each combination of array types it meets; computing one small table
of every scheme's examples, in each of its dtypes and components, meets them all and leaves the
machine code in ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

from posenc.registry import SCHEMES


def compile_kernels() -> None:
    for scheme in SCHEMES:
        if scheme.table is None:
            continue
        for example in scheme.examples:
            params = scheme.params(**example)
            for dtype in scheme.dtypes or ("int32",):
                for component in scheme.components or ("",):
                    scheme.table(params, 300, 0, dtype, component)
