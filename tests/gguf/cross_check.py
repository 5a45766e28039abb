"""The GGUF answer held to llama.cpp itself, beside the suite (``python -m tests.gguf.cross_check
[NAME ...]``): every tiny model of :mod:`tests.gguf.tiny_models` converted by llama.cpp's
converter, loaded by llama.cpp built from the same sdist, one token decoded, and every rope
node its graph built (:func:`tests.gguf.llama_cpp_ropes.record`, read through the eval
callback) compared with the answer's call for that node's layer: the ``ggml_rope_ext``
arguments and the factor tensor's values, exactly. Each layer the answer rotates must have a
node, each NoPE layer none. Prints one line per file and exits 1 on any disagreement.

llama.cpp is built the first time (minutes); the records' own ``llama_cpp_ropes`` does it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from posenc.schemes.rope.gguf import answer, reader
from tests.gguf import llama_cpp_ropes
from tests.gguf.converted import ALL, build_all

_SCALARS = ("n_dims", "mode", "n_ctx_orig", "freq_base", "freq_scale", "ext_factor",
            "attn_factor", "beta_fast", "beta_slow")  # fmt: skip


def _layer(name: str) -> int | None:
    """The layer llama.cpp's cb() named a node after (``Qcur-3`` → 3)."""
    head, _, tail = name.rpartition("-")
    return int(tail) if head and tail.isdigit() else None


def _matches(node: llama_cpp_ropes.RopeNode, rope: dict[str, Any], header: reader.Header) -> bool:
    call = rope["ggml"]
    if any(node[key] != call[key] for key in _SCALARS):  # type: ignore[literal-required]
        return False
    sections = call["sections"] or [0, 0, 0, 0]
    if node["mode"] & 8 and node["sections"] != sections:  # ggml_rope_multi's
        return False
    named = call["freq_factors"]
    if named is None:
        return node["factors"] is None
    factors = [float(f) for f in header.rope_tensors[named]]
    return node["factors"] == factors


def _expected(result: dict[str, Any]) -> list[tuple[int, list[dict[str, Any]]]]:
    """The nodes llama.cpp's graph builds, in order: for each rotating layer, one node per
    tensor each of its ropes turns."""
    by_layer: dict[int, list[dict[str, Any]]] = {}
    for rope in result["ropes"]:
        for il in rope["layers"]:
            by_layer.setdefault(il, []).append(rope)
    return [
        (il, ropes)
        for il in sorted(by_layer)
        for ropes in [by_layer[il]]
        for _ in range(sum(len(rope["applies_to"]) for rope in ropes))
    ]


def compare(path: Path, nodes: list[llama_cpp_ropes.RopeNode]) -> list[str]:
    """What differs between llama.cpp's rope nodes for ``path`` and the answer for it: each
    node in graph order against the layer it falls in (by its name, ``Qcur-3``, or where a
    graph leaves its ropes unnamed, by its place), one node per tensor a rope turns."""
    header = reader.read(path.read_bytes())
    result = answer.answer(header, None)
    expected = _expected(result)
    named = [_layer(node["name"]) for node in nodes]
    if all(il is not None for il in named):
        nodes = [n for n, il in zip(nodes, named, strict=True) if il < result["num_hidden_layers"]]
        order = sorted(range(len(nodes)), key=lambda i: _layer(nodes[i]["name"]) or 0)
        nodes = [nodes[i] for i in order]
    problems = []
    if len(nodes) != len(expected):
        problems.append(
            f"llama.cpp built {len(nodes)} rope nodes in the decoder's layers; the answer's "
            f"ropes turn {len(expected)} tensors"
        )
    for node, (il, ropes) in zip(nodes, expected, strict=False):
        if not any(_matches(node, rope, header) for rope in ropes):
            problems.append(f"layer {il}, {node['name']}: llama.cpp passed {node}, the answer "
                            f"says {[r['ggml'] for r in ropes]}")  # fmt: skip
    return problems


def _reason(error: RuntimeError) -> str:
    lines = str(error).splitlines()
    loading = [line for line in lines if "error loading model" in line]
    return (loading or lines)[-1].strip()


def main(names: list[str]) -> int:
    with tempfile.TemporaryDirectory() as root:
        converted = build_all(Path(root), names or None)
        files = {name: path for name, (path, _) in converted.items()}
        failed = 0
        for name, path in files.items():
            if name.endswith(".mmproj"):  # llama.cpp loads a projector with libmtmd, not here
                continue
            try:
                (nodes,) = llama_cpp_ropes.record([path])
            except RuntimeError as error:
                print(f"{name} ({ALL[name].arch}): not loaded: {_reason(error)}")
                continue
            problems = compare(path, nodes)
            verdict = "agrees" if not problems else f"DISAGREES ({len(problems)})"
            print(f"{name} ({ALL[name].arch}): {len(nodes)} rope nodes, {verdict}", flush=True)
            for problem in problems:
                print(f"    {problem}")
            failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
