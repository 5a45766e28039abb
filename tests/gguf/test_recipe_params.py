"""``POST /v1/rope/gguf`` held to llama.cpp itself: for files llama.cpp's converter wrote
(their keys and rope tensors as tests/gguf/records keeps them), each rope's ``ggml`` call is the
arguments llama.cpp passed ``ggml_rope_ext`` for those layers, and its ``params`` are a rope
whose ``recipe=ggml`` derivation gives the same arguments, bit for bit."""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
import pytest

from posenc.schemes.rope.gguf import answer, reader
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml
from tests.gguf.files import gguf
from tests.gguf.records import load

RECORD = load("scalings")
CASES = {f"{case['name']}@{case['n_ctx']}": case for case in RECORD["cases"]}
pytestmark = pytest.mark.skipif(
    platform.machine() != RECORD["machine"], reason=f"measured on {RECORD['machine']}"
)
_ARGUMENTS = ("n_dims", "mode", "freq_base", "freq_scale", "ext_factor", "attn_factor",
              "beta_fast", "beta_slow")  # fmt: skip


def _file(case: dict[str, Any]) -> bytes:
    """The converter's file again, less its vocabulary and weights: its keys and rope tensors."""
    tensors = [(name, np.array(v, np.float32)) for name, v in case["rope_tensors"].items()]
    return gguf(case["metadata"], tensors)


def _layer_nodes(case: dict[str, Any], layers: list[int]) -> list[dict[str, Any]]:
    """The recorded nodes of ``layers`` (llama.cpp names them ``Qcur-0``, ``k_pe-0`` …)."""
    nodes = [n for n in case["nodes"] if int(n["name"].rsplit("-", 1)[1]) in layers]
    assert nodes, (case["name"], layers)
    return nodes


@pytest.mark.parametrize("name", CASES)
def test_the_answer_s_ggml_call_is_what_llama_cpp_passed(name: str) -> None:
    case = CASES[name]
    file = reader.read(_file(case))
    for rope in answer.answer(file, case["n_ctx"])["ropes"]:
        call = rope["ggml"]
        named = call["freq_factors"]
        factors = None if named is None else [float(f) for f in file.rope_tensors[named]]
        for node in _layer_nodes(case, rope["layers"]):
            assert {k: call[k] for k in _ARGUMENTS} == {k: node[k] for k in _ARGUMENTS}
            assert call["n_ctx_orig"] == node["n_ctx_orig"] and factors == node["factors"]


@pytest.mark.parametrize("name", CASES)
def test_recipe_ggml_of_the_answer_s_params_derives_llama_cpp_s_call(name: str) -> None:
    case = CASES[name]
    for rope in answer.answer(reader.read(_file(case)), case["n_ctx"])["ropes"]:
        given: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in rope["params"].items()
        }
        derived = ggml.derive(RopeParams(**{**given, "recipe": "ggml"}))
        for node in _layer_nodes(case, rope["layers"]):
            assert {k: getattr(derived, k) for k in _ARGUMENTS} == {k: node[k] for k in _ARGUMENTS}
            assert list(derived.freq_factors or ()) == (node["factors"] or [])
            if node["ext_factor"]:  # YaRN's ramp is the only reader of n_ctx_orig
                assert derived.n_ctx_orig == node["n_ctx_orig"]
