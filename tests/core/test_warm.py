"""``posenc.warm`` (what an image build runs) leaves no loop for the first request to compile:
one process warms a fresh numba cache, as the image build does; another, as the service would,
reads a GGUF header with a vocabulary and a rope tensor and computes MLX's rope from its base,
and finds every loop in the cache — none compiled for a signature the warm-up missed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_WARM = "from posenc.warm import compile_kernels; compile_kernels()"
# The loops no scheme example reaches, which compile_kernels compiles on its own.
_FIRST_REQUESTS = """
import json
from posenc.schemes.rope import maths
from posenc.schemes.rope.gguf import loops, reader
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import mlx
from tests.gguf.files import TINY_LLAMA, gguf, llama_31_prefix

reader.read(gguf({**TINY_LLAMA, "tokenizer.ggml.tokens": ["a", "b", "c"]}))
reader.read(llama_31_prefix())
maths.table(RopeParams(d_model=16, recipe="mlx"), 50, 0, "float32", "cos_sin")
print(json.dumps({
    name: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
    for name, f in (
        ("gguf strings", loops.skip),
        ("gguf tensor infos", loops.infos),
        ("mlx from the base", mlx._default_inverse),
    )
}))
"""


def _run(script: str, cache: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


def test_the_first_requests_find_every_loop_compiled(tmp_path: Path) -> None:
    _run(_WARM, tmp_path)
    loaded = json.loads(_run(_FIRST_REQUESTS, tmp_path).strip().splitlines()[-1])
    # [loaded from the cache, compiled afresh] per loop
    assert all(hits >= 1 and misses == 0 for hits, misses in loaded.values()), loaded
