"""Each rope's ``params`` are what ``recipe=ggml`` needs to make llama.cpp's own call: the
runtime recipe's ``derive`` of them gives back the ``ggml`` arguments the file makes llama.cpp
pass, bit for bit (it runs once the recipe is in the tree; measured before the merge on the
25 files of tests/gguf/test_converter.py at two contexts: all equal)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from posenc.schemes.rope.gguf import answer, reader
from tests.gguf.files import gguf
from tests.gguf.test_rules import header

ggml = pytest.importorskip("posenc.schemes.rope.recipes.ggml")

FILES: dict[str, tuple[dict[str, Any], list[tuple[str, Any]]]] = {
    "llama3": (
        header("llama", rope__freq_base=5e5),
        [("rope_freqs.weight", np.arange(1, 9, dtype=np.float32))],
    ),
    "yarn": (
        header("qwen2", rope__scaling__type="yarn", rope__scaling__factor=4.0,
               rope__scaling__original_context_length=2048),
        [],
    ),
    "deepseek": (
        header("deepseek2", rope__scaling__type="yarn", rope__scaling__factor=40.0,
               rope__scaling__yarn_log_multiplier=0.0707),
        [],
    ),
    "longrope": (
        header("phi3", rope__scaling__attn_factor=1.19,
               rope__scaling__original_context_length=4000),
        [("rope_factors_long.weight", np.full(8, 2, np.float32)),
         ("rope_factors_short.weight", np.ones(8, np.float32))],
    ),
    "gemma3": (
        header("gemma3", 12, rope__freq_base=1e6, rope__scaling__type="linear",
               rope__scaling__factor=8.0, attention__sliding_window=512),
        [],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("n_ctx", [None, 3900, 4097])
def test_recipe_ggml_derives_llama_cpps_call_from_the_params(name: str, n_ctx: int | None) -> None:
    from posenc.schemes.rope.params import RopeParams

    values, tensors = FILES[name]
    file = reader.read(gguf(values, tensors))
    for rope in answer.answer(file, n_ctx)["ropes"]:
        given: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in rope["params"].items()
        }
        derived = ggml.derive(RopeParams(**{**given, "recipe": "ggml"}))
        call = rope["ggml"]
        named = call["freq_factors"]
        factors = None if named is None else tuple(map(float, file.rope_tensors[named]))
        assert derived.freq_factors == factors
        assert (derived.n_dims, derived.freq_base, derived.freq_scale, derived.attn_factor) == (
            call["n_dims"], call["freq_base"], call["freq_scale"], call["attn_factor"]
        )  # fmt: skip
        assert (derived.ext_factor, derived.beta_fast, derived.beta_slow) == (
            call["ext_factor"], call["beta_fast"], call["beta_slow"]
        )  # fmt: skip
