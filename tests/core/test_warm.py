"""``posenc.warm`` (what an image build runs) leaves no loop for the first request to compile:
checked in a fresh process, whose loops start uncompiled, against a fresh numba cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Loops no scheme example reaches, which compile_kernels compiles on its own.
_PROBE = """
import json
from posenc.warm import compile_kernels
from posenc.schemes.rope.gguf import loops
from posenc.schemes.rope.recipes import mlx
compile_kernels()
print(json.dumps({
    "gguf skip": len(loops.skip.signatures),
    "gguf infos": len(loops.infos.signatures),
    "mlx from the base": len(mlx._default_inverse.signatures),
}))
"""


def test_compile_kernels_compiles_the_loops_no_example_reaches(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    compiled = json.loads(ran.stdout.strip().splitlines()[-1])
    assert all(count >= 1 for count in compiled.values()), compiled
