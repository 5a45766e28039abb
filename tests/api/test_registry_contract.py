"""One contract over the registry, as scipy tests its windows: every scheme × endpoint × format ×
dtype, with d_model 1, 2, odd and large where the scheme takes them, one position, and positions
near 0 and near 2^31 − 1.

What holds for every answer: values finite; ``json`` parses to exactly the ``bin`` bytes; the
``encode`` rows equal the ``table`` rows at the same positions; ``verify`` passes every check
that applies (and says why of one that does not); float32 within the README's bound of an
independent float64 reference (``mpmath`` is the core tests' job; here the served float64 table
rounded once is the reference for the float32 one).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from posenc import registry
from posenc.declare import Scheme
from tests.conftest import Client

FAR = 2**31 - 16  # room for the 16 rows of a verify
# The README's bound for float32 and float16 tables on the rotation path: 0.5 + 2^-14 ulp.
ROUNDING_ULP = 0.5 + 2**-14


def _widths(scheme: Scheme, example: dict[str, Any]) -> list[dict[str, Any]]:
    """The example, and d_model 1, 2, odd and large where the scheme takes them."""
    if "d_model" not in {f.name for f in scheme.fields()}:
        return [example]
    varied = [example]
    for d_model in (1, 2, 7, 1024):
        if scheme.rows == "grid" and (d_model < 2 * len(example["grid"]) or d_model % 2):
            # Too few channels, or an odd count that leaves the last axis short: cells repeat,
            # and unique_positions fails, rightly.
            continue
        try:
            scheme.params(**{**example, "d_model": d_model})
        except ValueError:
            continue  # this scheme refuses it (rope: even; grids: multiples of 4 or 6)
        varied.append({**example, "d_model": d_model})
    return varied


def _cases() -> Iterator[Any]:
    for scheme in registry.SCHEMES:
        for example in scheme.examples:
            for params in _widths(scheme, example):
                label = f"{scheme.name}-" + "-".join(f"{k}={v}" for k, v in params.items())
                yield pytest.param(scheme, params, id=label[:90])


def _query(params: dict[str, Any]) -> str:
    def text(value: Any) -> str:
        return ",".join(map(str, value)) if isinstance(value, tuple | list) else str(value)

    return "&".join(f"{key}={text(value)}" for key, value in params.items())


def _rows(scheme: Scheme, offset: int, count: int) -> str:
    return "" if scheme.rows == "grid" else f"&seq_len={count}&offset={offset}"


def _npy(response: Any) -> np.ndarray[Any, Any]:
    assert response.status_code == 200, response.text[:300]
    loaded: np.ndarray[Any, Any] = np.load(io.BytesIO(response.content))
    return loaded


@pytest.mark.parametrize(("scheme", "params"), list(_cases()))
def test_every_scheme_keeps_the_contract(client: Client, scheme: Scheme, params: Any) -> None:
    base = f"/v1/{scheme.name}"
    query = _query(params)
    dtypes = scheme.dtypes or ("int32",)
    offsets = [0] if scheme.rows == "grid" else [0, FAR]
    for offset in offsets:
        for count in (1, 5):
            rows = _rows(scheme, offset, count)
            for dtype in dtypes:
                typed = f"&dtype={dtype}" if scheme.dtypes else ""
                answer = client.get(f"{base}/table?{query}{rows}{typed}&format=npy")
                if dtype == "float16" and answer.status_code == 422:
                    # positions themselves past 65504 (the index baseline): refused, never inf
                    problem = answer.json()
                    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
                    continue
                table = _npy(answer)
                if np.issubdtype(table.dtype, np.floating):
                    assert np.isfinite(table).all()
                raw = client.get(f"{base}/table?{query}{rows}{typed}&format=bin")
                envelope = client.get(f"{base}/table?{query}{rows}{typed}&format=json").json()
                parsed = np.asarray(envelope["data"], dtype=envelope["dtype"])
                assert parsed.tobytes() == raw.content == table.tobytes()
                if scheme.rows == "positions" and scheme.vectors is not None and table.ndim == 2:
                    picked = [offset + count - 1, offset]
                    listed = ",".join(map(str, picked))
                    encoded = _npy(
                        client.get(f"{base}/encode?{query}&positions={listed}{typed}&format=npy")
                    )
                    if "normalized" not in scheme.name:  # its scale is the largest position
                        assert encoded.tobytes() == table[[count - 1, 0]].tobytes()
            # the framework recipe is float32 arithmetic on purpose: not a rounding of exact
            framework = params.get("recipe") == "framework"
            if scheme.dtypes and not framework:
                exact = _npy(client.get(f"{base}/table?{query}{rows}&dtype=float64&format=npy"))
                single = _npy(client.get(f"{base}/table?{query}{rows}&dtype=float32&format=npy"))
                _assert_rounded_once(single, exact)
        report = client.get(f"{base}/verify?{query}{_rows(scheme, offset, 16)}").json()
        _assert_verify_passes(scheme, report)


def _assert_rounded_once(single: np.ndarray[Any, Any], exact: np.ndarray[Any, Any]) -> None:
    """float32 values within the promised bound of the float64 ones, in float32 ulps."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    spacing = np.maximum(spacing, float(np.finfo(np.float32).smallest_subnormal))
    # The float64 table is within ~1 float64 ulp of exact: 2^-29 of a float32 ulp, allowed here.
    ulps = np.abs(single.astype(np.float64) - exact) / spacing
    assert float(ulps.max(initial=0.0)) <= ROUNDING_ULP + 2**-20


def _assert_verify_passes(scheme: Scheme, report: dict[str, Any]) -> None:
    failing = [check for check in report["checks"] if check["holds"] is False]
    for check in report["checks"]:
        if check["value"] is None:
            assert "does not apply" in check["detail"], check
    if scheme.name in ("index", "normalized", "binary"):
        return  # the teaching baselines exist to fail checks; their failures are pinned elsewhere
    if report["params"].get("recipe") in ("framework", "ggml", "mlx"):
        return  # a float32 recipe (a framework's, a runtime's) is inexact by design: its failures
        # are the finding
    assert not failing, failing
    assert report["passed"] is True
