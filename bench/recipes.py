"""Issue 32's goal: a cold ``recipe=ggml`` or ``recipe=mlx`` table costs no more than
``recipe=framework``'s (transformers' float32 recipe), each computed by the core as the service
computes it, best of 5 with a new base each time (no cached frequencies)."""

from __future__ import annotations

import time
from collections.abc import Callable

from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import Recipe, RopeParams

_RECIPES: tuple[Recipe, ...] = ("framework", "ggml", "mlx")


def _cold_seconds(recipe: Recipe, n: int, d: int) -> float:
    best = float("inf")
    for attempt in range(5):
        params = RopeParams(d_model=d, base=500000.0 + attempt, recipe=recipe)
        start = time.perf_counter()
        rope.table(params, n, 0, "float32")
        best = min(best, time.perf_counter() - start)
    return best


def runtime_recipes(row: Callable[[str, str, str, str], None]) -> None:
    for recipe in _RECIPES:  # compile each runtime's loops before timing them
        rope.table(RopeParams(d_model=8, recipe=recipe), 4, 0, "float32")
    for n, d in ((8192, 128), (32768, 128), (2048, 64)):
        framework = _cold_seconds("framework", n, d)
        for recipe in ("ggml", "mlx"):
            seconds = _cold_seconds(recipe, n, d)
            row(
                f"32. cold rope cos_sin {n}×{d} recipe={recipe}",
                f"{seconds * 1e3:.2f} ms",
                f"recipe=framework {framework * 1e3:.2f} ms",
                f"{framework / seconds:.2f}× ({'met' if seconds <= framework else 'MISSED'}: ≤ 1×)",
            )


if __name__ == "__main__":
    runtime_recipes(lambda *cells: print("  ".join(cells)))
