"""Compile the loops ahead of the first request (an image build calls this).

numba compiles a loop for each combination of array types it meets; computing one small table
of every scheme's examples, in each of its dtypes and components, meets them all and leaves the
machine code in ``NUMBA_CACHE_DIR``; among them the tables a GGUF check measures its recipe
noise with (ggml's rows, the exact ones). The loops no example reaches, each scheme declares
(``Scheme.loops``: rope's are MLX's frequencies from the base, the GGUF header reader's and the
kernel analyser's; measured 0.17 s, 0.25 s and 2.4 s of a first request otherwise). Every GGUF
answer, M-RoPE check, vision projector's answer and kernel analysis runs no other compiled loop
(``tests/core/test_warm.py`` runs them on the warmed cache and finds no miss).
"""

from __future__ import annotations

from posenc.registry import SCHEMES


def compile_kernels() -> None:
    for scheme in SCHEMES:
        for compile_loops in scheme.loops:
            compile_loops()
        if scheme.table is None:
            continue
        for example in scheme.examples:
            params = scheme.params(**example)
            for dtype in scheme.dtypes or ("int32",):
                for component in scheme.components or ("",):
                    scheme.table(params, 300, 0, dtype, component)
