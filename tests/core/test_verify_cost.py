"""Every verify's declared bytes hold above the peak tracemalloc measures, so the model cannot
drift below reality; the work it declares is checked against time by bench.verify_worst."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from posenc import registry as schemes
from posenc.schemes.grid.maths import Grid2DParams, Grid3DParams
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.sinusoidal import conformance
from posenc.schemes.sinusoidal.params import SinusoidalParams

PARAMS: dict[str, Any] = {
    "sinusoidal": SinusoidalParams(d_model=48),
    "rope": RopeParams(d_model=48, scaling="yarn", factor=4.0, original_max_position_embeddings=64),
    "sinusoidal2d": Grid2DParams(d_model=16, grid=(12, 20)),
    "sinusoidal3d": Grid3DParams(d_model=18, grid=(4, 5, 6)),
}
SIZES = [1, 2, 70, 300]


def _measured_peak(build: Callable[[], Any], run: Callable[[Any], object]) -> int:
    """Peak traced bytes while ``run`` works on what ``build`` made (which stays counted).

    Run once untraced first: what a first call sets up once per process (compiled loops,
    caches of constants) is start-up, not the cost of a request."""
    run(build())
    tracemalloc.start()
    try:
        made = build()
        tracemalloc.reset_peak()
        run(made)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", [scheme.name for scheme in schemes.SCHEMES])
def test_declared_verify_bytes_hold_above_the_measured_peak(name: str, n: int) -> None:
    scheme = schemes.get(name)
    params = PARAMS.get(name) or scheme.params(
        **({"d_model": 40} if name not in ("alibi", "t5") else {})
    )
    if scheme.rows == "grid":
        n = int(np.prod(params.grid))
    positions = np.arange(n, dtype=np.int64)
    dtype = "float64" if scheme.dtypes else "int32"
    component = scheme.components[0] if scheme.components else ""
    peak = _measured_peak(
        lambda: scheme.encode(params, positions, dtype, component),
        lambda served: scheme.verify(params, served, positions),
    )
    assert peak <= scheme.verify_cost(params, n).bytes


@pytest.mark.parametrize(("n", "d"), [(1, 4), (64, 33), (400, 64)])
def test_declared_conformance_bytes_hold_above_the_measured_peak(n: int, d: int) -> None:
    params = SinusoidalParams(d_model=d)
    # A faulty table (float32 angles at a large offset) takes the diagnosis's longest road.
    positions = np.arange(10**6, 10**6 + n)

    def build() -> Any:
        angles = positions.astype(np.float32)[:, None] * np.float32(0.5) ** np.arange(d)
        return np.sin(angles).astype(np.float64)

    peak = _measured_peak(build, lambda table: conformance.check(params, table, 10**6))
    assert peak <= conformance.conformance_cost(params, n, d).bytes
