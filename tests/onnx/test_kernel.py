"""What the attributes the service reads mean to ONNX Runtime's own kernels (onnxruntime 1.31,
CPU): a one-node graph of each RotaryEmbedding turning basis vectors shows which dimensions
each cache column turns, so ``interleaved`` in an answer is the pairs the runtime turns."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

D = 8


def _turned(domain: str, interleaved: int) -> dict[int, tuple[int, float, float]]:
    """For each dimension j, the other dimension e_j turns into at position 1, and the cos and
    sin it is turned by; the cache's column i turns by angle 0.1·(i + 1)."""
    angles = 0.1 * (np.arange(D // 2) + 1)
    cos = np.stack([np.ones(D // 2), np.cos(angles)]).astype(np.float32)
    sin = np.stack([np.zeros(D // 2), np.sin(angles)]).astype(np.float32)
    inputs = ["x", "cos", "sin", "positions"] if domain == "" else ["x", "positions", "cos", "sin"]
    node = helper.make_node(
        "RotaryEmbedding", inputs, ["y"], domain=domain, interleaved=interleaved
    )
    graph = helper.make_graph(
        [node],
        "rotary",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D, 1, D]),
            helper.make_tensor_value_info("positions", TensorProto.INT64, [1, 1]),
            helper.make_tensor_value_info("cos", TensorProto.FLOAT, [2, D // 2]),
            helper.make_tensor_value_info("sin", TensorProto.FLOAT, [2, D // 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, D, 1, D])],
    )
    opsets = [helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    session = onnxruntime.InferenceSession(model.SerializeToString())
    basis = np.eye(D, dtype=np.float32).reshape(1, D, 1, D)
    feeds = {"x": basis, "positions": np.array([[1]]), "cos": cos, "sin": sin}
    (out,) = session.run(None, feeds)
    found = {}
    for j in range(D):
        row = out[0, j, 0]
        other = next(k for k in range(D) if k != j and abs(row[k]) > 1e-6)
        found[j] = (other, float(row[j]), float(row[other]))
    return found


@pytest.mark.parametrize("domain", ["com.microsoft", ""])
def test_interleaved_kernels_turn_neighbours_by_one_cache_column(domain: str) -> None:
    turned = _turned(domain, 1)
    for i in range(D // 2):
        other, cos, sin = turned[2 * i]
        assert other == 2 * i + 1
        assert cos == pytest.approx(np.cos(0.1 * (i + 1)), abs=1e-6)
        assert abs(sin) == pytest.approx(np.sin(0.1 * (i + 1)), abs=1e-6)


@pytest.mark.parametrize("domain", ["com.microsoft", ""])
def test_split_kernels_turn_dimension_i_with_i_plus_half(domain: str) -> None:
    turned = _turned(domain, 0)
    for i in range(D // 2):
        other, cos, sin = turned[i]
        assert other == i + D // 2
        assert cos == pytest.approx(np.cos(0.1 * (i + 1)), abs=1e-6)
        assert abs(sin) == pytest.approx(np.sin(0.1 * (i + 1)), abs=1e-6)
