"""The service's reading of ONNX Runtime GenAI models, held to files the builder itself writes:
tiny random transformers models of each family it supports, built for CPU (float32) and for
CUDA, DirectML and WebGPU (float16), each file's caches compared with transformers' own rotary
module (tests.onnx.truth) — the suite, not the builder's README, says which outputs are right —
and the service's verdict held to that: a right file conforms, a wrong one names its fault."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Client
from tests.onnx import files, truth
from tests.onnx.build import BUILDS, target_name

pytestmark = pytest.mark.onnx_builder

# What the service finds in each output of the builder (onnxruntime-genai 0.18.0, transformers
# 5.23), each measured here against transformers' rotary module: empty where the file is right.
EXPECTED: dict[tuple[str, str], frozenset[str]] = {
    # Llama's builder reads llama3 only: linear and YaRN scalings are dropped without a word,
    # and YaRN's attention factor with them.
    ("llama-linear", "fp32-cpu"): frozenset({"scaling_dropped"}),
    ("llama-yarn", "fp32-cpu"): frozenset({"scaling_dropped", "attention_factor"}),
    # Its YaRN ramp runs between the unrounded correction dimensions: transformers rounds them
    # outwards unless truncate is false (gpt-oss, right below).
    ("qwen2.5-yarn", "fp32-cpu"): frozenset({"scaling_changed"}),
    ("qwen2.5-yarn", "fp16-cuda"): frozenset({"scaling_changed"}),
}
# Configs the builder cannot build: the exception it raises.
FAILS = {
    # Qwen3's YaRN without beta_fast/beta_slow: the builder's defaults are 0, divided by.
    "qwen3-yarn": "ZeroDivisionError",
    # LongRoPE as transformers 5 saves it: phi.py reads rope_parameters["type"].
    "phi3-longrope-v5": "KeyError",
    # SmolLM3 with a NoPE layer: the layer asks for position_ids the fused rope removed.
    "smollm3-nope": "KeyError",
    # Gemma 3's per-layer-type rope_parameters.
    "gemma3": "KeyError",
}
OUTPUTS = [
    (name, target_name(target))
    for name, build in BUILDS.items()
    for target in build.targets
    if name not in FAILS
]


@cache
def _checked(folder: Path, with_config: bool) -> dict[str, Any]:
    """The service's answer for a built model (with its config.json), asked once a session."""
    config = json.loads((folder.parent / "hf" / "config.json").read_text())
    return files.check(Client(), folder, config if with_config else None)[0]


_truth = cache(truth.of)


def _right(folder: Path, hf: Path) -> tuple[bool, str]:
    """Whether every cache of the file holds what transformers' module computes for the
    lengths that read it (builder names: a cache, LongRoPE's large and small pair, or both
    concatenated), and the pairs the model's attention turns."""
    expected = _truth(hf)
    found = files.caches(folder)
    dtype = "float16" if folder.name.startswith("fp16") else "float32"
    right = True
    for name, values in found.items():
        table = expected.long[0] if name.startswith("cos") else expected.long[1]
        short = (
            None if expected.short is None else expected.short[0 if name.startswith("cos") else 1]
        )
        if name.endswith("_small"):
            assert short is not None
            right &= truth.holds(values, short, dtype)
        elif short is not None and expected.original and values.shape[0] > table.shape[0]:
            # One concatenated cache: the short rows, then the long ones.
            right &= truth.holds(values[: expected.original], short, dtype)
            right &= truth.holds(values[expected.original :], table, dtype)
        else:
            right &= truth.holds(values, table, dtype)
    return right, expected.pairs


@pytest.mark.parametrize(("name", "target"), OUTPUTS, ids=[f"{n}-{t}" for n, t in OUTPUTS])
def test_the_verdict_on_each_builder_output_is_transformers_own(
    builds: Path, name: str, target: str
) -> None:
    folder, hf = builds / name / target, builds / name / "hf"
    answer = _checked(folder, True)
    expected = EXPECTED.get((name, target), frozenset())
    right, pairs = _right(folder, hf)
    interleaved = {rope["interleaved"] for rope in answer["ropes"]}
    assert interleaved == {pairs == "interleaved"}
    assert right == (not expected), (
        f"transformers says the caches are {'right' if right else 'wrong'}"
    )
    assert {finding["kind"] for finding in answer["findings"]} == expected, answer["findings"]
    assert answer["conforms"] == (not expected)


@pytest.mark.parametrize(("name", "target"), OUTPUTS, ids=[f"{n}-{t}" for n, t in OUTPUTS])
def test_each_rope_of_a_builder_output_is_fitted_to_its_rows(
    builds: Path, name: str, target: str
) -> None:
    answer = _checked(builds / name / target, False)
    resolution = {"float32": 2.0**-24, "float16": 2.0**-11}
    for rope in answer["ropes"]:
        # Without a config the rope the rows fit is found from the rows alone, and its exact
        # table is the rows up to float32's rounding of angles near the cache's end and the
        # type's.
        assert rope["params"] is not None
        last = rope["max_abs_difference"]["positions"][1]
        bound = 4 * resolution[rope["dtype"]] * rope["attention_factor"] + 2.0**-24 * last * 4
        assert rope["max_abs_difference"]["exact"] <= bound, rope


@pytest.mark.parametrize(("name", "target"), OUTPUTS, ids=[f"{n}-{t}" for n, t in OUTPUTS])
def test_the_builder_computes_transformers_float32_recipe_of_what_it_writes(
    builds: Path, name: str, target: str
) -> None:
    answer = _checked(builds / name / target, True)
    # Right or wrong, every cache the builder wrote is transformers' float32 table of the rope
    # it holds (within an ulp of its type) where that rope is transformers'; YaRN's unrounded
    # ramp is no rope transformers computes.
    recipes = {rope["recipe"] for rope in answer["ropes"]}
    wrong_ramp = "scaling_changed" in EXPECTED.get((name, target), frozenset())
    assert recipes == ({None} if wrong_ramp else {"framework"})


@pytest.mark.parametrize("name", sorted(FAILS))
def test_the_builder_refuses_these_configs(builds: Path, name: str) -> None:
    (target,) = BUILDS[name].targets
    error = json.loads((builds / name / target_name(target) / "error.json").read_text())
    assert error["type"] == FAILS[name]
