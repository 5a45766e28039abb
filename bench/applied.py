"""Issue 40's goal: ``POST /v1/rope/applied`` reads a 4096-token × 32-head × 128 float32 pair (a
prefill's q before and after its rope, 2^24 values each) in under a second, computed by the core
as the service computes it, best of 3, the compiled loops loaded first; beside it the same pair
with a fault planted (the rope applied twice; a bfloat16 cos/sin table turning the float32 q),
which adds the diagnosis."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from posenc.declare import Part
from posenc.numerics import bfloat16
from posenc.schemes.rope import maths
from posenc.schemes.rope.applied import loops
from posenc.schemes.rope.applied.answer import answer
from posenc.schemes.rope.params import RopeParams

TOKENS, HEADS, HEAD_DIM = 4096, 32, 128
GOAL_S = 1.0


def _npy(array: np.ndarray[Any, Any]) -> Part:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return Part(buffer.getvalue())


def _turned(
    x: np.ndarray[Any, Any], params: RopeParams, table: bool = False
) -> np.ndarray[Any, Any]:
    cos, sin = maths.encode(params, np.arange(len(x)), "float32", "cos_sin")
    if table:
        cos, sin = bfloat16.rounded(cos), bfloat16.rounded(sin)
    return maths.rotate_with(params.layout, x, cos[:, None], sin[:, None]).astype(np.float32)


def _best_seconds(before: Part, after: Part, query: dict[str, Any]) -> tuple[float, Any]:
    best, found = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        found = answer(before, after, None, None, query)
        best = min(best, time.perf_counter() - start)
    return best, found


def applied(row: Callable[[str, str, str, str], None]) -> None:
    loops.compile_loops()
    params = RopeParams(d_model=HEAD_DIM, base=500000.0)
    query = {"d_model": HEAD_DIM, "base": 500000.0}
    x = np.random.default_rng(40).standard_normal((TOKENS, HEADS, HEAD_DIM)).astype(np.float32)
    once = _turned(x, params)
    cases = (
        ("faithful", once),
        ("applied twice", _turned(once, params)),
        ("bfloat16 table", _turned(x, params, table=True)),
    )
    before = _npy(x)
    for label, after in cases:
        seconds, found = _best_seconds(before, _npy(after), query)
        names = [finding["name"] for finding in found["diagnosis"]]
        row(
            f"40. applied {TOKENS}×{HEADS}×{HEAD_DIM} float32, {label}",
            f"{seconds * 1e3:.0f} ms",
            f"holds {found['holds']} {names or found['measured']['recipe']}",
            f"{'met' if seconds < GOAL_S else 'MISSED'}: < {GOAL_S:g} s",
        )


if __name__ == "__main__":
    applied(lambda *cells: print("  ".join(cells)))
