"""``posenc.warm`` (what an image build runs) leaves no loop for the first request to compile:
one process warms a fresh numba cache, as the image build does; another, as the service would,
runs the first GGUF requests (a header with a vocabulary, a file checked beside its config with
its recipe noise, an M-RoPE check, a vision projector), computes MLX's rope from its base and
reads the rope a kernel applied, and finds every loop in the cache — none compiled for a
signature the warm-up missed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_WARM = "from posenc.warm import compile_kernels; compile_kernels()"
# What a first GGUF request runs — a header with a vocabulary, Llama 3.1's prefix and its check
# beside its config (recipe noise: ggml's and the exact tables), Qwen3-VL's M-RoPE check, a
# vision projector's answer — and MLX's rope from its base: every compiled loop they reach.
_FIRST_REQUESTS = """
import json
from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.numerics import kernels
from posenc.schemes.rope import maths
from posenc.schemes.rope.gguf import answer, conformance, loops, reader
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml, mlx
from tests.gguf.files import TINY_LLAMA, gguf, llama_31_prefix
from tests.hub_configs import llama_31_rope_scaling

reader.read(gguf({**TINY_LLAMA, "tokenizer.ggml.tokens": ["a", "b", "c"]}))
llama = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
         "num_hidden_layers": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
         "rope_scaling": llama_31_rope_scaling()}
conformance.check(reader.read(llama_31_prefix()), llama, None, SERVICE_DEFAULTS)
qwen3vl = {"general.architecture": "qwen3vl", "qwen3vl.context_length": 8192,
           "qwen3vl.block_count": 2, "qwen3vl.embedding_length": 64,
           "qwen3vl.attention.head_count": 4, "qwen3vl.attention.key_length": 16,
           "qwen3vl.rope.freq_base": 5e6, "qwen3vl.rope.dimension_sections": [2, 3, 3, 0]}
text = {"model_type": "qwen3_vl_text", "hidden_size": 64, "num_attention_heads": 4,
        "head_dim": 16, "num_hidden_layers": 2, "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [2, 3, 3],
                            "mrope_interleaved": True}}
conformance.check(reader.read(gguf(qwen3vl)), {"model_type": "qwen3_vl", "text_config": text},
                  None, SERVICE_DEFAULTS)
projector = {"general.architecture": "clip", "clip.projector_type": "qwen2vl_merger",
             "clip.vision.block_count": 2, "clip.vision.embedding_length": 64,
             "clip.vision.attention.head_count": 4}
answer.answer(reader.read(gguf(projector)), None)
maths.table(RopeParams(d_model=16, recipe="mlx"), 50, 0, "float32", "cos_sin")
from tests.clients.plan import example_form
from posenc.declare import Part, Upload
from posenc.schemes.rope.applied import loops as applied, operation as applied_operation
form = example_form("/v1/rope/applied")
arrays = {name: (Part(form[name]),) for name in ("before", "after")}
applied_operation.handle(Upload(b"", {}, {"config": form["config"]}, arrays), SERVICE_DEFAULTS)
applied_operation.handle(Upload(b"", {"d_model": 4}, {}, arrays), SERVICE_DEFAULTS)  # 4 dims still
print(json.dumps({
    name: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
    for name, f in (
        ("gguf strings", loops.skip),
        ("gguf tensor infos", loops.infos),
        ("ggml's rope rows", ggml._cache_rows),
        ("exact rows: reduce", kernels._reduce_grid),
        ("exact rows: unfold", kernels._unfold),
        ("exact rows: store", kernels._store_rows),
        ("mlx from the base", mlx._default_inverse),
        ("a kernel's sums", applied.sums),
        ("a kernel's spreads", applied.spreads),
        ("a kernel's still dims", applied.still),
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
    missed = {name: counts for name, counts in loaded.items() if counts[0] < 1 or counts[1] != 0}
    assert not missed, missed
