"""A real model's check in well under a second: the graphs of Llama 3.1 8B (32 layers, head
128, 131072 positions of caches in external data) and of Phi-3 mini 128k (its two LongRoPE
pairs inline in the graph, 52 MB of it) as the builder writes them, with tiny widths: the
check reads the same graph and the same sampled rows as for the real weights."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import Client
from tests.onnx import files

# Times against a bound: alone, not beside another worker (make test runs serial tests last).
pytestmark = [pytest.mark.onnx_builder, pytest.mark.serial]


@pytest.mark.parametrize("name", ["llama3.1-8b", "phi3-mini-128k"])
def test_a_real_models_check_takes_well_under_a_second(
    real_shapes: Path, client: Client, name: str
) -> None:
    folder = real_shapes / name / "fp32-cpu"
    config = json.loads((real_shapes / name / "hf" / "config.json").read_text())
    files.check(client, folder, config)  # compiled loops and imports warm
    started = time.perf_counter()
    answer, sent = files.check(client, folder, config)
    took = time.perf_counter() - started
    assert answer["conforms"], answer["findings"]
    assert answer["num_hidden_layers"] == 32
    graph = (folder / "model.onnx").stat().st_size
    # Beside the graph, only the sampled rows: 21 positions × 64 pairs × 2 caches × 4 bytes
    # for Llama (10.5 KiB of a 77 MB data file), nothing for Phi-3 (its caches are inline).
    assert sent == (21 * 64 * 2 * 4 if name.startswith("llama") else 0)
    # Both requests (the refusal naming the ranges, then the answer), through the whole app:
    # 0.04 s and 0.45 s measured, most of Phi-3's moving its 52 MB through the test client.
    assert took < 1.0, f"{name}: {took:.3f} s for a graph of {graph} bytes"
