"""``recipe=ggml`` held to llama.cpp itself: for files llama.cpp's converter wrote from tiny models
of every scaling it implements, the rope nodes llama.cpp built (tests/gguf/records, written by
``python -m tests.gguf.records``) against what posenc derives from the same model's config —
the arguments (:func:`recipes.ggml.derive`), the converter's factor tensors
(:func:`recipes.ggml.llama3_factors`, LongRoPE's long or short by context) and the served table,
which ggml-cpu computes from llama.cpp's own arguments bit for bit.

The mode is not compared here: a Llama-family converter permutes Q and K, so llama.cpp's NORMAL
pairs turn the model's rotate_half; ``tests/gguf/test_recipe_params.py`` holds the GGUF answer's
mode to the records.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from posenc.numerics.float32 import power
from posenc.schemes.rope.maths import encode
from posenc.schemes.rope.models import config as rope_config
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml
from posenc.schemes.rope.recipes.llama_cpp import RopeCall
from tests.gguf.records import load
from tests.reference.llama_cpp_args import Call, call

RECORD = load("scalings")
CASES = {f"{case['name']}@{case['n_ctx']}": case for case in RECORD["cases"]}
# The records' attention factors are libllama's arithmetic on the machine that measured them.
pytestmark = pytest.mark.skipif(
    platform.machine() != RECORD["machine"], reason=f"measured on {RECORD['machine']}"
)
_SCALARS = ("n_dims", "freq_base", "freq_scale", "ext_factor", "attn_factor", "beta_fast",
            "beta_slow")  # fmt: skip


def model_params(case: dict[str, Any]) -> RopeParams:
    """The rope ``/v1/rope/config`` names for the case's model (one layer, one rope), as its
    ``table_ggml`` link gives it, at the case's context."""
    (rope,) = rope_config.read(case["config"]).ropes
    params = dataclasses.replace(ggml.as_converted(rope.params), recipe="ggml")
    if params.scaling == "longrope":  # the only rope llama.cpp's context changes
        params = dataclasses.replace(params, n_ctx=case["n_ctx"])
    return params


def _arguments(rope: RopeCall | Call) -> dict[str, Any]:
    found = {name: getattr(rope, name) for name in _SCALARS}
    # ggml reads n_ctx_orig for YaRN's ramp only (ggml_rope_yarn_corr_dims under ext_factor ≠ 0)
    found["n_ctx_orig"] = rope.n_ctx_orig if rope.ext_factor else None
    factors = rope.freq_factors if isinstance(rope, RopeCall) else rope.factors
    found["factors"] = None if factors is None else list(factors)
    return found


def _recorded(node: dict[str, Any]) -> dict[str, Any]:
    found = {name: node[name] for name in _SCALARS}
    found["n_ctx_orig"] = node["n_ctx_orig"] if node["ext_factor"] else None
    found["factors"] = node["factors"]
    return found


def test_the_records_cover_every_scaling_llama_cpp_implements() -> None:
    scalings = {model_params(case).scaling for case in RECORD["cases"]}
    assert scalings == {"none", "linear", "llama3", "yarn", "longrope"}
    assert all(case["nodes"] for case in RECORD["cases"])
    assert RECORD["llama_cpp"] == "0c1e57098" and RECORD["command"]


@pytest.mark.parametrize("name", CASES)
def test_derive_gives_the_arguments_llama_cpp_passed_ggml(name: str) -> None:
    case = CASES[name]
    derived = _arguments(ggml.derive(model_params(case)))
    for node in case["nodes"]:
        assert derived == _recorded(node), node["name"]


@pytest.mark.parametrize("name", CASES)
def test_the_reference_s_own_derivation_is_what_llama_cpp_passed(name: str) -> None:
    """tests.reference.llama_cpp_args, which the runtime tests hand ggml-python at parameters
    no record covers, is llama.cpp's arithmetic where llama.cpp was measured."""
    case = CASES[name]
    derived = _arguments(call(model_params(case)))
    for node in case["nodes"]:
        assert derived == _recorded(node), node["name"]


def _tensor(case: dict[str, Any], name: str) -> list[float]:
    values: list[float] = case["rope_tensors"][name]
    return values


@pytest.mark.parametrize(
    "name", [n for n, c in CASES.items() if "rope_freqs.weight" in c["rope_tensors"]]
)
def test_llama3_factors_are_the_converter_s_rope_freqs_bit_for_bit(name: str) -> None:
    case = CASES[name]
    written = np.array(_tensor(case, "rope_freqs.weight"), dtype=np.float32)
    ours = ggml.llama3_factors(model_params(case))
    assert ours.tobytes() == written.tobytes()
    assert all(node["factors"] == written.tolist() for node in case["nodes"])


@pytest.mark.parametrize(
    "name", [n for n, c in CASES.items() if "rope_factors_long.weight" in c["rope_tensors"]]
)
def test_longrope_factors_are_the_converter_s_and_chosen_by_llama_cpp_s_context(name: str) -> None:
    case = CASES[name]
    params = model_params(case)
    long, short = (
        np.array(_tensor(case, f"rope_factors_{k}.weight"), np.float32) for k in ("long", "short")
    )
    assert long.tolist() == np.array(params.long_factor, np.float32).tolist()
    assert short.tolist() == np.array(params.short_factor, np.float32).tolist()
    chosen = ggml.derive(params).freq_factors
    assert all(node["factors"] == list(chosen or ()) for node in case["nodes"])


_POSITIONS = np.concatenate([np.arange(64), [4095, 2**24 + 1, 1_000_003, 2**31 - 1]])


@pytest.mark.parametrize("name", CASES)
def test_the_served_ggml_table_is_ggml_cpu_s_with_llama_cpp_s_own_arguments(name: str) -> None:
    pytest.importorskip("ggml", reason="ggml-python is part of the reference extra")
    from tests.reference import runtimes

    case = CASES[name]
    params = model_params(case)
    # Each pair's cos and sin, whichever dimensions the mode pairs.
    cos, sin = runtimes.ggml_halves(Call.of_node(case["nodes"][0]), _POSITIONS)
    table = encode(params, _POSITIONS, "float32", "cos_sin")
    half = params.d_model // 2
    pick = slice(0, None, 2) if params.layout == "interleaved" else slice(0, half)
    assert np.array_equal(table[0][:, pick], cos) and np.array_equal(table[1][:, pick], sin)


@pytest.fixture(scope="module")
def llama3_conversions(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Tiny Llama models of random Llama 3 ropes (width, base, factor, bands, original context),
    each written by llama.cpp's converter, with the ``rope_freqs`` it wrote."""
    import torch
    from gguf import GGUFReader
    from transformers import AutoConfig, AutoModelForCausalLM

    from tests.gguf.convert import convert

    rng = np.random.default_rng(43)
    root = tmp_path_factory.mktemp("llama3")
    found, pairs = [], []
    torch.manual_seed(0)
    for draw in range(6):
        low = float(rng.choice([0.5, 1.0, 2.0]))
        rope = {
            "rope_type": "llama3",
            "factor": float(rng.choice([2.0, 5.5, 8.0, 16.0, 32.0])),
            "low_freq_factor": low,
            "high_freq_factor": low * float(rng.choice([1.0, 2.0, 4.0, 8.0])),
            "original_max_position_embeddings": int(rng.choice([2048, 4096, 8192, 16384])),
        }
        head_dim, base = 2 * int(rng.integers(2, 129)), float(np.round(10 ** rng.uniform(3, 7)))
        config = AutoConfig.for_model(
            "llama", hidden_size=64, intermediate_size=128, num_attention_heads=2,
            num_key_value_heads=1, num_hidden_layers=1, vocab_size=128, head_dim=head_dim,
            rope_theta=base, max_position_embeddings=131072, rope_scaling=rope,
        )  # fmt: skip
        model_dir = root / str(draw)
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
        model.save_pretrained(model_dir)
        found.append({"config": json.loads((model_dir / "config.json").read_text()), "n_ctx": None})
        pairs.append((model_dir, root / f"{draw}.gguf"))
    convert(pairs)
    for case, (_, out) in zip(found, pairs, strict=True):
        (tensor,) = (t for t in GGUFReader(out).tensors if t.name == "rope_freqs.weight")
        case["rope_freqs"] = np.array(tensor.data, dtype=np.float32)
    return found


def _torch_pow_is_correctly_rounded(params: RopeParams) -> npt.NDArray[np.bool_]:
    """Where torch's float32 ``base ** (arange(0, d, 2) / d)`` (SLEEF's vector ``powf``, which
    depends on the CPU) is the correctly rounded power that posenc computes."""
    import torch

    exponents = torch.arange(0, params.d_model, 2, dtype=torch.float32) / params.d_model
    theirs = (params.base**exponents).numpy()
    return np.asarray(power(np.float32(params.base), exponents.numpy()) == theirs)


@pytest.mark.llama_cpp
def test_llama3_factors_are_the_converter_s_wherever_torch_s_pow_is_correctly_rounded(
    llama3_conversions: list[dict[str, Any]],
) -> None:
    """The converter computes rope_freqs from torch's float32 pow, whose vector routine is not
    always correctly rounded (numbers.md): where it is, llama3_factors is the converter's tensor
    bit for bit; the torch expressions of tests.reference.llama_cpp_args are everywhere."""
    rounded_otherwise = 0
    for case in llama3_conversions:
        params, written = model_params(case), case["rope_freqs"]
        same = _torch_pow_is_correctly_rounded(params)
        assert np.array_equal(ggml.llama3_factors(params)[same], written[same]), params
        assert np.array(call(params).factors, np.float32).tobytes() == written.tobytes()
        rounded_otherwise += int((~same).sum())
    assert rounded_otherwise  # the draws reach frequencies torch rounds otherwise (2 here)
