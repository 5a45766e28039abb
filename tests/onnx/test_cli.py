"""``posenc model model.onnx [--config config.json]`` (or the builder's output folder): the
installed script in a subprocess reads the graph, sends itself the external ranges the check
asks for, and answers what the service answers; exit 0 conforms, 1 not, 2 bad input; through
a real uvicorn (``--url``) the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import posenc
from tests.conftest import Client
from tests.live.conftest import LiveServer, start_server, stop_server
from tests.onnx import graphs
from tests.onnx.files import check

CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 512,
    "num_attention_heads": 4,
    "rope_theta": 500000.0,
    "max_position_embeddings": 4096,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A builder-shaped output folder: the graph, its external data, genai_config.json."""
    made = tmp_path_factory.mktemp("onnx-out")
    graphs.saved(graphs.plain(length=4096, pairs=64, base=500000.0), made, True)
    genai = {
        "model": {
            "context_length": 4096,
            "decoder": {"filename": "model.onnx", "num_hidden_layers": 2},
        }
    }
    (made / "genai_config.json").write_text(json.dumps(genai))
    (made / "config.json").write_text(json.dumps(CONFIG))
    (made / "other.json").write_text(json.dumps({**CONFIG, "rope_theta": 10000.0}))
    return made


def test_a_builders_folder_is_checked_against_its_config(folder: Path) -> None:
    ran = posenc("model", folder, "--config", folder / "config.json")
    assert ran.code == 0, ran.stderr
    assert "layers 0, 1  cos_cache (4096 × 64 float32, split)" in ran.stdout
    assert ran.stdout.rstrip().endswith("conforms")


def test_the_json_is_the_services_answer(folder: Path) -> None:
    ran = posenc("model", folder / "model.onnx", "--config", folder / "config.json", "--json")
    assert ran.code == 0, ran.stderr
    answer, _ = check(Client(), folder, CONFIG)
    assert json.loads(ran.stdout) == answer


def test_a_cache_of_another_rope_exits_1_naming_the_finding(folder: Path) -> None:
    ran = posenc("model", folder, "--config", folder / "other.json")
    assert ran.code == 1
    assert "base (layers 0, 1): another base: the model's 10000.0, the cache's 500000.0" in (
        ran.stdout
    )


def test_external_data_outside_the_models_folder_is_refused(tmp_path: Path) -> None:
    made = graphs.plain()
    for tensor in made.graph.initializer:
        tensor.ClearField("raw_data")
        tensor.data_location = 1
        for key, value in (("location", "../elsewhere.data"), ("offset", "0"), ("length", "8192")):
            tensor.external_data.add(key=key, value=value)
    (tmp_path / "model.onnx").write_bytes(graphs.serialised(made))
    ran = posenc("model", tmp_path / "model.onnx")
    assert ran.code == 2 and "outside" in ran.stderr


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    live = start_server({})
    yield live
    stop_server(live)


@pytest.mark.live
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_the_check_says_the_same_through_the_service(
    folder: Path, server: LiveServer, extra: list[Any]
) -> None:
    args = ["model", folder, "--config", folder / "other.json", *extra]
    here, there = posenc(*args), posenc(*args, "--url", server.url)
    assert there.code == here.code == 1, there.stderr
    assert there.stdout == here.stdout
