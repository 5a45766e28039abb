"""`python -m bench.verify_worst`: every scheme's verify at the largest size its cost admits.

For each scheme (and, where the work depends on the width, a narrow and a wide case) it finds
the largest ``n`` whose declared work is at most ``WORK`` units, builds the served array, runs
the verify once timed and once under tracemalloc, and prints the seconds against the work
(the model promises at most ~1 ns a unit) and the measured peak against the declared bytes
(the served array is traced too, as the model counts it).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.schemes.alibi import maths as alibi
from posenc.schemes.alibi import verify as alibi_verify
from posenc.schemes.baselines import maths as baselines
from posenc.schemes.baselines import verify as baselines_verify
from posenc.schemes.grid import maths as grid
from posenc.schemes.grid import verify as grid_verify
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope import verify as rope_verify
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.sinusoidal import conformance
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.schemes.sinusoidal import verify as sinusoidal_verify
from posenc.schemes.sinusoidal.params import SinusoidalParams
from posenc.schemes.t5 import maths as t5
from posenc.schemes.t5 import verify as t5_verify
from posenc.verify import Report

WORK = 2 * 10**9


@dataclass(frozen=True)
class Case:
    label: str
    params: Any
    verify: Callable[[Any, npt.NDArray[Any], npt.NDArray[np.int64]], Report]
    cost: Callable[[Any, int], Cost]
    serve: Callable[[Any, int], tuple[npt.NDArray[Any], npt.NDArray[np.int64]]]
    grid_axes: int = 0  # n is the cells of a square (cube) grid of this many axes


def _positions(n: int) -> npt.NDArray[np.int64]:
    return np.arange(n, dtype=np.int64)


def _sinusoid(p: Any, n: int) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    return sinusoidal.table(p, n, 0, "float32"), _positions(n)


def _encoder(
    encode: Callable[..., npt.NDArray[Any]], dtype: str | None = "float32"
) -> Callable[[Any, int], tuple[npt.NDArray[Any], npt.NDArray[np.int64]]]:
    def serve(p: Any, n: int) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
        positions = _positions(n)
        return (encode(p, positions) if dtype is None else encode(p, positions, dtype)), positions

    return serve


def _faulty(p: Any, n: int) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """A client's table with float32 angles: the diagnosis takes its longest road."""
    positions = _positions(n)
    table = sinusoidal.encode(p, positions, "float64")
    angles = positions.astype(np.float32)[:, None] * np.float32(1e-3)
    table[:, 0] = np.sin(angles[:, 0])
    return table.astype(np.float32), positions


def _conformance(p: Any, table: npt.NDArray[Any], positions: npt.NDArray[np.int64]) -> Report:
    conformance.check(p, table, 0)
    return Report((), ())  # the bench reads only time and memory


def _grid_params(d: int, axes: int, n: int) -> grid.GridParams:
    side = max(1, round(n ** (1 / axes)))
    kind = grid.Grid2DParams if axes == 2 else grid.Grid3DParams
    return kind(d_model=d, grid=(side,) * axes)


CASES = [
    Case(
        "sinusoidal d=512",
        SinusoidalParams(512),
        sinusoidal_verify.verify,
        sinusoidal_verify.verify_cost,
        _sinusoid,
    ),
    Case(
        "sinusoidal d=2",
        SinusoidalParams(2),
        sinusoidal_verify.verify,
        sinusoidal_verify.verify_cost,
        _sinusoid,
    ),
    *(
        Case(
            f"POST conformance d={d}",
            SinusoidalParams(d),
            _conformance,
            lambda p, n: conformance.conformance_cost(p, n, p.d_model),
            _faulty,
        )
        for d in (512, 2)
    ),
    Case(
        "rope d=2",
        RopeParams(2),
        rope_verify.verify_rope,
        rope_verify.verify_rope_cost,
        _encoder(rope.encode),
    ),
    Case(
        "rope d=128",
        RopeParams(128),
        rope_verify.verify_rope,
        rope_verify.verify_rope_cost,
        _encoder(rope.encode),
    ),
    Case(
        "alibi heads=8",
        alibi.AlibiParams(8),
        alibi_verify.verify_alibi,
        alibi_verify.verify_alibi_cost,
        _encoder(alibi.encode),
    ),
    Case(
        "alibi heads=1",
        alibi.AlibiParams(1),
        alibi_verify.verify_alibi,
        alibi_verify.verify_alibi_cost,
        _encoder(alibi.encode),
    ),
    Case(
        "t5",
        t5.T5Params(),
        t5_verify.verify_t5,
        t5_verify.verify_t5_cost,
        _encoder(t5.encode, "int32"),
    ),
    *(
        Case(
            f"sinusoid{axes}d d=64",
            _grid_params(64 if axes == 2 else 66, axes, 1),
            grid_verify.verify_grid,
            grid_verify.verify_grid_cost,
            _encoder(grid.encode),
            grid_axes=axes,
        )
        for axes in (2, 3)
    ),
    *(
        Case(
            f"{name} d={d}",
            baselines.BaselineParams(d),
            baselines_verify.verify_baseline,
            baselines_verify.verify_baseline_cost,
            _encoder(encode),
        )
        for name, encode in (
            ("index", baselines.index),
            ("normalized", baselines.normalized),
            ("binary", baselines.binary),
        )
        for d in (64, 4096)
    ),
]


def _params_at(case: Case, n: int) -> tuple[Any, int]:
    if not case.grid_axes:
        return case.params, n
    params = _grid_params(case.params.d_model, case.grid_axes, n)
    return params, int(np.prod(params.grid))


def largest_n(case: Case) -> int:
    low, high = 1, 2
    while case.cost(*_params_at(case, high)).work <= WORK and high < 2**31:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (
            (middle, high) if case.cost(*_params_at(case, middle)).work <= WORK else (low, middle)
        )
    return low


def run(case: Case) -> dict[str, Any]:
    params, n = _params_at(case, largest_n(case))
    cost = case.cost(params, n)
    served, positions = case.serve(params, n)
    start = time.perf_counter()
    report = case.verify(params, served, positions)
    seconds = time.perf_counter() - start
    del served
    tracemalloc.start()
    served, positions = case.serve(params, n)
    tracemalloc.reset_peak()
    case.verify(params, served, positions)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "case": case.label,
        "n": n,
        "seconds": seconds,
        "work": cost.work,
        "ns_per_unit": seconds * 1e9 / cost.work,
        "peak_mib": peak / 2**20,
        "declared_mib": cost.bytes / 2**20,
        "passed": report.passed,
    }


def main() -> None:
    print(
        f"{'case':<22} {'n':>9} {'seconds':>8} {'work':>12} {'ns/unit':>8} "
        f"{'peak MiB':>9} {'declared':>9}  ok"
    )
    for case in CASES:
        r = run(case)
        ok = r["ns_per_unit"] <= 1.0 and r["peak_mib"] <= r["declared_mib"]
        print(
            f"{r['case']:<22} {r['n']:>9} {r['seconds']:>8.3f} {r['work']:>12.3e} "
            f"{r['ns_per_unit']:>8.3f} {r['peak_mib']:>9.1f} {r['declared_mib']:>9.1f}  "
            f"{'yes' if ok else 'NO'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
