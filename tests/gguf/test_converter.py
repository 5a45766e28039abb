"""The service's reading of a GGUF held to files llama.cpp's own converter writes: tiny random
transformers models of each family (:mod:`tests.gguf.tiny_models`), converted in one
subprocess, read back, and compared with what ``/v1/rope/config`` says of the same config
(every layer conforms, or the finding llama.cpp's source explains); each rope's parameters give
back the ``ggml`` call; each finding fires on a file rewritten with the ``gguf`` package (a
tensor or key dropped, a value changed) and is silent on the faithful one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.gguf.converted import Converted, check, kinds
from tests.gguf.tiny_models import DIVERGENT, MODELS

pytestmark = pytest.mark.llama_cpp


@pytest.mark.parametrize("name", MODELS)
def test_each_converted_model_conforms_at_every_layer(converted: Converted, name: str) -> None:
    file, config = converted[name]
    n_ctx = 4096 if name == "phi3-longrope" else None  # its long factors: a finding past 4096
    result = check(file, config, n_ctx)
    assert result["architecture"] == MODELS[name].arch
    assert result["findings"] == [] and result["conforms"] is True
    # every layer in one attention rope or NoPE (an indexer's rope turns the same layers again)
    attention = [r for r in result["ropes"] if not r["applies_to"][0].startswith("indexer")]
    layers = sorted([il for r in attention for il in r["layers"]] + result["nope_layers"])
    assert layers == list(range(result["model"]["num_hidden_layers"]))
    for rope in result["ropes"]:  # recipe noise, reported beside the verdict
        noise = rope["max_abs_difference"]
        # an indexer's is not the config's rope; frozen pairs recipe=ggml does not serve
        if rope["applies_to"][0].startswith("indexer") or "rotary_pairs" in rope["params"]:
            assert noise is None
            continue
        assert noise["positions"][1] == result["n_ctx"] - 1
        # float32 angles: ~16 ulps of the position at most (2^-24 each)
        bound = result["n_ctx"] * 2**-20 + 1e-5
        assert 0 <= noise["exact"] < bound and 0 <= noise["transformers"] < 2 * bound


@pytest.mark.parametrize("name", DIVERGENT)
def test_where_llama_cpp_applies_another_rope_the_finding_names_it(
    converted: Converted, name: str
) -> None:
    file, config = converted[name]
    result = check(file, config)
    assert result["architecture"] == DIVERGENT[name].arch
    assert result["conforms"] is False and kinds(result) == [DIVERGENT[name].finding]


def test_qwen2vls_sections_are_read(converted: Converted) -> None:
    result = check(*converted["qwen2-vl"])
    assert result["mrope"] == {"section": [2, 3, 3, 0], "interleaved": False}
    assert result["ropes"][0]["ggml"]["mode"] == 8


def test_qwen3vls_interleaved_sections_are_read(
    converted: Converted,
) -> None:
    result = check(*converted["qwen3-vl"])
    assert result["mrope"] == {"section": [2, 3, 3, 0], "interleaved": True}
    assert result["ropes"][0]["ggml"]["mode"] == 40 and result["ropes"][0]["rope_type"] == "imrope"
    (finding,) = result["findings"]
    assert finding["evidence"]["pairs"] == [6] and finding["layers"] == [0, 1]
    # pair 6 of 8 at the model's base: the angle the model turns it by at n_ctx's last position
    position = result["n_ctx"] - 1
    assert finding["evidence"]["position"] == position
    base = result["model"]["ropes"][0]["params"]["base"]
    expected = position * base ** (-2 * 6 / 16)
    assert finding["evidence"]["radians_per_pair"] == [pytest.approx(expected, rel=1e-12)]


def test_other_sections_are_an_mrope_sections_finding(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["qwen2-vl"]
    sections = {"qwen2vl.rope.dimension_sections": [3, 3, 2, 0]}
    (finding,) = check(rewrite(file, tmp_path / "x.gguf", values=sections), config)["findings"]
    # Pair 2 turns by the temporal id in the file, the height in the model; pair 5 by the
    # height against the width.
    assert finding["kind"] == "mrope_sections" and finding["evidence"]["pairs"] == [2, 5]
    assert finding["evidence"]["file_ids"] == ["temporal", "height"]


def test_an_m_rope_model_converted_without_sections_is_an_mrope_dropped_finding(
    converted: Converted, tmp_path: Path
) -> None:
    file, config = converted["qwen2-vl"]
    body = rewrite(file, tmp_path / "x.gguf", rename=("qwen2vl", "qwen2"))
    assert kinds(check(body, config)) == ["mrope_dropped"]


def test_a_model_relabelled_as_another_family_is_a_rope_type_finding(
    converted: Converted, tmp_path: Path
) -> None:
    # Qwen3's unpermuted weights under Command R's NORM rope: pairs (2i, 2i+1), not rotate_half.
    file, config = converted["qwen3"]
    body = rewrite(file, tmp_path / "x.gguf", rename=("qwen3", "command-r"))
    assert kinds(check(body, config)) == ["rope_type"]
    # A Llama-family conversion permutes Q/K: NORM there is rotate_half, no finding.
    assert check(rewrite(file, tmp_path / "y.gguf", rename=("qwen3", "llama")), config)["conforms"]


def test_gemma3s_sliding_layers_are_read_as_llama_cpp_applies_them(
    converted: Converted,
) -> None:
    file, _ = converted["gemma3"]
    result = check(file, converted["gemma3"][1])
    full = [r for r in result["ropes"] if r["params"]["scaling"] == "linear"]
    local = [r for r in result["ropes"] if r["params"]["scaling"] == "none"]
    assert full[0]["layers"] == [5] and local[0]["params"]["base"] == 10000.0


def rewrite(
    file: Path,
    out: Path,
    drop_keys: tuple[str, ...] = (),
    values: dict[str, Any] | None = None,
    drop_tensors: tuple[str, ...] = (),
    tensors: dict[str, np.ndarray[Any, Any]] | None = None,
    rename: tuple[str, str] | None = None,
) -> bytes:
    """``file`` written again with the gguf package, keys and tensors dropped or changed (or
    every ``{arch}.`` key under another architecture's name)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    source = GGUFReader(file)
    arch = str(source.fields["general.architecture"].contents())
    old, new = rename or (arch, arch)
    writer = GGUFWriter(out, arch=new)
    for key, field in source.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop_keys:
            continue
        kind = field.types[0]
        value = (values or {}).get(key, field.contents())
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        named = new + key[len(old) :] if key.startswith(old + ".") else key
        writer.add_key_value(named, value, kind, sub_type=sub)
    for key, value in (values or {}).items():
        if key not in source.fields:  # a key the converter did not write, typed as it types
            kind = GGUFValueType.UINT32 if isinstance(value, int) else GGUFValueType.FLOAT32
            writer.add_key_value(key, value, kind)
    for tensor in source.tensors:
        if tensor.name in drop_tensors:
            continue
        data = (tensors or {}).get(tensor.name, np.array(tensor.data))
        writer.add_tensor(tensor.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out.read_bytes()


def test_a_faithful_rewrite_still_conforms(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["llama3.1"]
    assert check(rewrite(file, tmp_path / "same.gguf"), config)["conforms"] is True


def test_a_dropped_factor_tensor_is_named(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["llama3.1"]
    body = rewrite(file, tmp_path / "x.gguf", drop_tensors=("rope_freqs.weight",))
    result = check(body, config)
    assert kinds(result) == ["factor_tensor_missing"] and result["findings"][0]["layers"] == [0, 1]


def test_a_wrong_factor_tensor_is_named(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["llama3.1"]
    wrong = {"rope_freqs.weight": np.full(8, 8.0, np.float32)}
    assert kinds(check(rewrite(file, tmp_path / "x.gguf", tensors=wrong), config)) == [
        "factor_tensor_wrong"
    ]


def test_another_base_is_named(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["qwen3"]
    body = rewrite(file, tmp_path / "x.gguf", values={"qwen3.rope.freq_base": 10000.0})
    assert kinds(check(body, config)) == ["base"]


def test_a_dropped_yarn_is_named_with_its_lost_attention_factor(
    converted: Converted, tmp_path: Path
) -> None:
    file, config = converted["qwen2.5-yarn"]
    dropped = ("qwen2.rope.scaling.type", "qwen2.rope.scaling.factor")
    body = rewrite(file, tmp_path / "x.gguf", drop_keys=dropped)
    assert kinds(check(body, config)) == ["scaling_dropped", "attention_factor"]


def test_yarn_changed_to_linear_is_named(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["qwen2.5-yarn"]
    body = rewrite(file, tmp_path / "x.gguf", values={"qwen2.rope.scaling.type": "linear"})
    assert "scaling_changed" in kinds(check(body, config))


def test_phi3s_attention_factor_lost_is_named(converted: Converted, tmp_path: Path) -> None:
    file, config = converted["phi3-longrope"]
    body = rewrite(file, tmp_path / "x.gguf", drop_keys=("phi3.rope.scaling.attn_factor",))
    assert kinds(check(body, config, 4096)) == ["attention_factor"]


def test_phi3s_long_factors_chosen_by_context_are_named(
    converted: Converted,
) -> None:
    file, config = converted["phi3-longrope"]
    assert kinds(check(file, config, 8192)) == ["longrope_by_context"]


def test_another_sliding_window_pattern_or_local_base_is_named(
    converted: Converted, tmp_path: Path
) -> None:
    file, config = converted["gemma3"]
    pattern = rewrite(
        file, tmp_path / "p.gguf", values={"gemma3.attention.sliding_window_pattern": 4}
    )
    local = rewrite(file, tmp_path / "b.gguf", values={"gemma3.rope.freq_base_swa": 1e6})
    moved = check(pattern, config)
    assert set(kinds(moved)) == {"sliding_window_pattern"}
    assert sorted(il for f in moved["findings"] for il in f["layers"]) == [3, 5, 7]
    assert kinds(check(local, config)) == ["base"]
