"""`posenc model model.gguf [--config config.json]`: a local GGUF file's ropes as llama.cpp
applies them, read from its header alone; with the model's config, exit 0 when it conforms and
1 when it does not, as `posenc check` exits."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.declare import Upload
from posenc.schemes.rope.gguf import operation
from tests.cli.conftest import posenc
from tests.gguf.files import TINY_LLAMA, gguf
from tests.live.conftest import LiveServer, start_server, stop_server

CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
}
# Weights after the header, as a real file has them; the command must not need them.
WEIGHTS = np.zeros(1 << 16, np.float32)


def write(tmp_path: Path, name: str = "model.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(gguf(TINY_LLAMA, [("token_embd.weight", WEIGHTS)]))
    return path


def test_json_is_the_operations_answer(tmp_path: Path) -> None:
    path = write(tmp_path)
    ran = posenc("model", path, "--json")
    assert ran.code == 0, ran.stderr
    expected = operation.handle(Upload(path.read_bytes(), {}), SERVICE_DEFAULTS)
    assert json.loads(ran.stdout) == json.loads(json.dumps(expected))


def test_the_text_names_the_architecture_and_each_ropes_layers(tmp_path: Path) -> None:
    ran = posenc("model", write(tmp_path))
    assert ran.stdout.startswith("llama: 2 layers, context 8192")
    assert ran.stdout.splitlines()[1:] == [
        "norm  layers 0, 1",
        "  d_model=16 base=500000 layout=interleaved scaling=none",
    ]


def header(tmp_path: Path, arch: str, **keys: Any) -> Path:
    """A GGUF header of ``arch`` with these keys (``attention__head_count``: a dotted key)."""
    path = tmp_path / f"{arch}.gguf"
    values = {f"{arch}.{key.replace('__', '.')}": value for key, value in keys.items()}
    path.write_bytes(gguf({"general.architecture": arch, **values}))
    return path


def test_each_rope_says_what_it_turns_where_it_is_not_q_and_k_with_the_mtp_layers_and_notes(
    tmp_path: Path,
) -> None:
    path = header(tmp_path, "deepseek32", block_count=4, nextn_predict_layers=1,
                  context_length=8192, embedding_length=64, attention__head_count=4,
                  rope__dimension_count=8)  # fmt: skip
    ran = posenc("model", path)
    assert ran.code == 0, ran.stderr
    *lines, note = ran.stdout.splitlines()[1:]
    assert lines == [
        "norm  layers 0-2  turns q_pe, k_pe",
        "  d_model=8 base=10000 layout=interleaved scaling=none",
        "neox  layers 0-2  turns indexer_q, indexer_k",
        "  d_model=8 base=10000 layout=split scaling=none",
        "mtp  layers 3",
    ]
    assert note == (
        "note  layer 3 (nextn_predict_layers) is a multi-token-prediction block: llama.cpp's "
        "decoder never runs it; a draft context (LLAMA_CONTEXT_TYPE_MTP) runs it as a "
        "speculative head"
    )


def test_a_rope_no_call_states_is_shown_with_its_layers_what_it_turns_and_why(
    tmp_path: Path,
) -> None:
    path = header(tmp_path, "deepseek4", block_count=4, context_length=8192,
                  embedding_length=64, attention__head_count=4,
                  attention__compress_ratios=[0, 4, 128, 4],
                  attention__compress_rope_freq_base=160000.0)  # fmt: skip
    lines = posenc("model", path).stdout.splitlines()[1:]
    assert lines[:5] == [
        "norm  layers 0  turns q, kv",
        "  d_model=16 base=10000 layout=interleaved scaling=none",
        "norm  layers 1-3  turns q, kv",
        "  d_model=16 base=160000 layout=interleaved scaling=none",
        "unstated  layers 1-3  turns compressed_kv, indexer_q, output",
    ]
    assert lines[5].startswith("  DeepSeek-V4's compressor turns each compressed block's key")
    assert "(ggml_rope_ext_back)" in lines[5] and len(lines) == 6


def test_m_ropes_sections_are_on_its_parameters_line(tmp_path: Path) -> None:
    path = header(tmp_path, "qwen2vl", block_count=2, context_length=8192, embedding_length=64,
                  attention__head_count=4, rope__dimension_sections=[2, 3, 3, 0])  # fmt: skip
    assert posenc("model", path).stdout.splitlines()[1:] == [
        "mrope  layers 0, 1",
        "  d_model=16 base=10000 layout=split scaling=none sections=2,3,3,0",
    ]


def test_a_vision_projector_names_no_context_and_each_axis_its_rope_turns(tmp_path: Path) -> None:
    path = tmp_path / "mmproj.gguf"
    path.write_bytes(gguf({"general.architecture": "clip", "clip.projector_type": "pixtral",
                           "clip.vision.block_count": 3, "clip.vision.attention.head_count": 2,
                           "clip.vision.embedding_length": 32}))  # fmt: skip
    first, *lines, note = posenc("model", path).stdout.splitlines()
    assert re.fullmatch(
        r"clip: 3 layers \(llama\.cpp \w{9}, tools/mtmd/models/pixtral\.cpp\)", first
    )
    assert [line for line in lines if not line.startswith(" ")] == [
        "norm  layers 0-2  turns q:row, k:row",
        "norm  layers 0-2  turns q:column, k:column",
    ]
    assert note.startswith("note  a vision projector (pixtral)")


def test_a_file_is_known_by_its_magic_whatever_its_name(tmp_path: Path) -> None:
    ran = posenc("model", write(tmp_path, "model.bin"), "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["architecture"] == "llama"


def test_with_its_config_a_conforming_file_exits_0_and_another_1(tmp_path: Path) -> None:
    path, config = write(tmp_path), tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    ran = posenc("model", path, "--config", config)
    assert ran.code == 0 and "conforms" in ran.stdout
    config.write_text(json.dumps({**CONFIG, "rope_theta": 10000.0}))
    ran = posenc("model", path, "--config", config)
    assert ran.code == 1 and "base (layers 0, 1)" in ran.stdout


def test_a_file_llama_cpp_would_refuse_is_exit_2_naming_why(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(gguf({**TINY_LLAMA, "general.architecture": "mamba"}))
    ran = posenc("model", path)
    assert ran.code == 2 and "'mamba' has no row" in ran.stderr


def test_config_options_are_refused_for_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    assert posenc("model", config, "--n-ctx", "8").code == 2


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    live = start_server({"POSENC_CACHE_BYTES": str(8 * 2**20)})
    yield live
    stop_server(live)


@pytest.mark.live
def test_the_service_says_what_the_command_says_given_the_header_alone(
    server: LiveServer, tmp_path: Path
) -> None:
    path, config = write(tmp_path), tmp_path / "config.json"
    config.write_text(json.dumps({**CONFIG, "rope_theta": 10000.0}))
    for extra in ((), ("--config", str(config)), ("--n-ctx", "4096")):
        here = posenc("model", path, "--json", *extra)
        there = posenc("model", path, "--json", *extra, "--url", server.url)
        assert there.code == here.code and json.loads(there.stdout) == json.loads(here.stdout)
