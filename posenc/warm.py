"""Compile the table loops ahead of the first request (an image build calls this).

numba compiles a loop for each combination of array types it meets; computing one small table
of every scheme's examples, in each of its dtypes and components, meets them all and leaves the
machine code in ``NUMBA_CACHE_DIR``; among them the tables a GGUF check measures its recipe
noise with (ggml's rows, the exact ones). Two loops no example reaches are compiled on their
own: MLX's from the base alone (the examples scale MLX's rope, which takes its frequencies
given) and the GGUF header reader's (measured: 0.17 s and 0.25 s of a first request otherwise).
Every GGUF answer, M-RoPE check and vision projector's answer runs no other compiled loop
(``tests/core/test_warm.py`` runs them on the warmed cache and finds no miss).
"""

from __future__ import annotations

from posenc.registry import SCHEMES
from posenc.schemes.rope import maths
from posenc.schemes.rope.gguf import reader
from posenc.schemes.rope.params import RopeParams


def compile_kernels() -> None:
    for scheme in SCHEMES:
        if scheme.table is None:
            continue
        for example in scheme.examples:
            params = scheme.params(**example)
            for dtype in scheme.dtypes or ("int32",):
                for component in scheme.components or ("",):
                    scheme.table(params, 300, 0, dtype, component)
    maths.table(RopeParams(d_model=8, recipe="mlx"), 300, 0, "float32", "cos_sin")
    reader.compile_loops()
