"""Each finding fires on a builder's file rewritten with the ``onnx`` package to hold that one
fault (an attribute flipped, caches of another base or width, the attention factor divided
out, an If's branches swapped or its threshold moved, caches cut short, a layer's rope turned
off, noise for rows), and the faithful file conforms (tests/onnx/test_builder.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.conftest import Client
from tests.onnx import files

pytestmark = pytest.mark.onnx_builder

Change = Callable[[onnx.ModelProto], None]


def _config(builds: Path, name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((builds / name / "hf" / "config.json").read_text())
    return config


def _findings(
    client: Client, builds: Path, tmp_path: Path, name: str, target: str, change: Change
) -> dict[str, Any]:
    folder = files.rewrite(builds / name / target, tmp_path / "rewritten", change)
    answer, _ = files.check(client, folder, _config(builds, name))
    return answer


def _interleaved(model: onnx.ModelProto) -> None:
    for node in files.nodes(model, "GroupQueryAttention"):
        files.set_attribute(node, "rotary_interleaved", 1)


def _base(model: onnx.ModelProto) -> None:
    made = files.rope_caches(4096, 8, 500000.0)
    files.replace_caches(model, lambda name, values: made[name])


def _short(model: onnx.ModelProto) -> None:
    files.replace_caches(model, lambda name, values: values[:1024])


def _reversed(model: onnx.ModelProto) -> None:
    files.replace_caches(model, lambda name, values: values[:, ::-1])


def _narrow(model: onnx.ModelProto) -> None:
    files.replace_caches(model, lambda name, values: values[:, :4])


def _noise(model: onnx.ModelProto) -> None:
    rng = np.random.default_rng(0)
    files.replace_caches(
        model, lambda name, values: rng.uniform(-1, 1, values.shape).astype(np.float32)
    )


def _nope(model: onnx.ModelProto) -> None:
    for node in files.nodes(model, "GroupQueryAttention"):
        if "/layers.1/" in node.name:
            files.set_attribute(node, "do_rotary", 0)
            node.input[7] = node.input[8] = ""


def _attention_divided_out(model: onnx.ModelProto) -> None:
    factor = 0.1 * np.log(4.0) + 1  # gpt-oss's YaRN factor 4
    files.replace_caches(model, lambda name, values: values / factor)


def _unscaled(model: onnx.ModelProto) -> None:
    made = files.rope_caches(16384, 16, 500000.0)
    files.replace_caches(model, lambda name, values: made[name])


def _if(model: onnx.ModelProto) -> onnx.NodeProto:
    (node,) = files.nodes(model, "If")
    return node


def _swapped(model: onnx.ModelProto) -> None:
    then, other = (a.g for a in _if(model).attribute if a.type == onnx.AttributeProto.GRAPH)
    kept = onnx.GraphProto()
    kept.CopyFrom(then)
    then.CopyFrom(other)
    other.CopyFrom(kept)


def _threshold(model: onnx.ModelProto) -> None:
    for node in files.nodes(model, "Constant"):
        if node.output[0] == "/model/constants/INT64/2048":
            lowered = numpy_helper.from_array(np.array(1024, dtype=np.int64))
            node.attribute[0].t.CopyFrom(lowered)


# (build, target, the rewrite, the findings it must raise)
REWRITES: dict[str, tuple[str, str, Change, set[str]]] = {
    "attributes flipped": ("llama", "fp32-cpu", _interleaved, {"interleaved"}),
    "caches of another base": ("llama", "fp32-cpu", _base, {"base"}),
    "caches shorter than the context": ("llama", "fp32-cpu", _short, {"cache_too_short"}),
    "pairs in reverse order": ("llama", "fp32-cpu", _reversed, {"frequencies_inverted"}),
    "half the rotary width": ("llama", "fp32-cpu", _narrow, {"rotary_width"}),
    "noise for rows": ("llama", "fp32-cpu", _noise, {"not_a_rotation"}),
    "a layer's rope turned off": ("llama", "fp32-cpu", _nope, {"nope_layers"}),
    "the attention factor divided out": (
        "gpt-oss",
        "fp32-cpu",
        _attention_divided_out,
        {"attention_factor"},
    ),
    "llama3's scaling left out": ("llama3.1", "fp32-cpu", _unscaled, {"scaling_dropped"}),
    # The long pair for short sequences (cut to their length), the short pair for long ones.
    "If branches swapped": (
        "phi3-longrope",
        "fp32-cpu",
        _swapped,
        {"longrope_switch", "cache_too_short"},
    ),
    "long factors from another length": (
        "phi3-longrope",
        "fp32-cpu",
        _threshold,
        {"longrope_switch"},
    ),
}


@pytest.mark.parametrize("fault", sorted(REWRITES))
def test_each_finding_fires_on_a_file_rewritten_to_hold_its_fault(
    builds: Path, client: Client, tmp_path: Path, fault: str
) -> None:
    name, target, change, expected = REWRITES[fault]
    answer = _findings(client, builds, tmp_path, name, target, change)
    assert not answer["conforms"]
    assert {finding["kind"] for finding in answer["findings"]} == expected, answer["findings"]
    for finding in answer["findings"]:
        assert finding["layers"], finding


def test_a_sliding_layer_that_turns_by_the_full_layers_rope_is_named(
    builds: Path, client: Client
) -> None:
    # Gemma 3's two ropes (local base 10000 on sliding layers, 1e6 on full ones) against
    # Gemma 2's file, whose two layers both turn at base 10000: layer 1, full, is named.
    saved = {k: v for k, v in _config(builds, "gemma2").items() if k != "rope_parameters"}
    config = {
        **saved,
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "rope_theta": 1e6,
        "rope_local_base_freq": 10000.0,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    answer, _ = files.check(client, builds / "gemma2" / "fp32-cpu", config)
    (finding,) = answer["findings"]
    assert finding["kind"] == "sliding_layer" and finding["layers"] == [1]


def test_the_standard_rotary_operator_of_opset_23_is_read_as_microsofts(
    builds: Path, client: Client, tmp_path: Path
) -> None:
    def standard(model: onnx.ModelProto) -> None:
        for node in files.nodes(model, "RotaryEmbedding"):
            x, positions, cos, sin = node.input
            node.domain = ""
            del node.input[:]
            node.input.extend([x, cos, sin, positions])
            kept = [a for a in node.attribute if a.name in ("interleaved", "num_heads")]
            del node.attribute[:]
            node.attribute.extend(kept)
        for opset in model.opset_import:
            if opset.domain in ("", "ai.onnx"):
                opset.version = 23

    folder = files.rewrite(builds / "llama" / "fp16-dml", tmp_path / "opset23", standard)
    answer, _ = files.check(client, folder, _config(builds, "llama"))
    assert {rope["op"] for rope in answer["ropes"]} == {"ai.onnx.RotaryEmbedding"}
    assert answer["conforms"], answer["findings"]
