"""POST /encode as a Transformer input layer; /verify measured on the served table."""

from __future__ import annotations

import numpy as np
import pytest

from posenc import SinusoidalParams, encode
from tests.conftest import Client

SIN_CHECKS = [
    "formula_equivalence",
    "bounded",
    "unique_positions",
    "constant_norm",
    "relative_rotation",
    "offset_invariant_dot",
    "frequency_range",
    "float32_rounding",
]


def test_post_encode_without_embeddings_is_the_encoding(client: Client) -> None:
    response = client.post("/v1/encode", json={"d_model": 6, "positions": [7, 0, 7]})
    expected = encode(SinusoidalParams(d_model=6), np.array([7, 0, 7]), "float32")
    assert np.array_equal(np.array(response.json()["data"], np.float32), expected)
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("scale", [False, True])
def test_post_encode_adds_the_encoding_to_scaled_embeddings_in_float64(
    client: Client, scale: bool
) -> None:
    rng = np.random.default_rng(3)
    embeddings = rng.normal(size=(3, 8))
    body = {
        "d_model": 8,
        "positions": [1, 2, 1000],
        "embeddings": embeddings.tolist(),
        "scale": scale,
        "dtype": "float64",
    }
    data = np.array(client.post("/v1/encode", json=body).json()["data"])
    pe = encode(SinusoidalParams(d_model=8), np.array([1, 2, 1000]))
    factor = np.sqrt(8) if scale else 1.0
    assert np.array_equal(data, embeddings * factor + pe)


def test_post_encode_serves_binary_formats_by_query(client: Client) -> None:
    response = client.post("/v1/encode?format=bin", json={"d_model": 4, "positions": [5]})
    assert response.headers["x-array-shape"] == "1,4"
    assert np.frombuffer(response.content, "<f4").shape == (4,)


def test_verify_reports_every_check_and_statistic_of_the_contract(client: Client) -> None:
    report = client.get("/v1/verify?d_model=64").json()
    assert report["scheme"] == "sinusoidal"
    assert report["params"] == {
        "d_model": 64,
        "base": 10000.0,
        "layout": "interleaved",
        "convention": "vaswani",
        "recipe": "exact",
        "dtype": "float32",
        "seq_len": 128,
        "offset": 0,
    }
    assert [c["name"] for c in report["checks"]] == SIN_CHECKS
    assert report["passed"] is True
    for check in report["checks"]:
        assert check["holds"] is True
        assert check["detail"]
        assert check["value"] <= check["tolerance"]
    statistics = {s["name"]: s["value"] for s in report["statistics"]}
    assert {
        "mean_abs_cosine_distinct",
        "min_pairwise_distance",
        "closest_pair",
        "wavelength_min",
        "wavelength_max",
    } <= set(statistics)
    assert statistics["wavelength_min"] == pytest.approx(2 * np.pi)
    assert 0.2 < statistics["mean_abs_cosine_distinct"] < 0.9  # not near-orthogonal


def test_verify_numbers_are_measured_on_the_served_table(client: Client) -> None:
    checks = {}
    for dtype in ("float16", "float32", "float64"):
        report = client.get(f"/v1/verify?d_model=32&dtype={dtype}").json()
        checks[dtype] = {c["name"]: c for c in report["checks"]}
    rotation = [checks[d]["relative_rotation"]["value"] for d in ("float16", "float32", "float64")]
    # Each dtype's rounding shows in its own residual: coarser type, larger error.
    assert rotation[0] > rotation[1] > rotation[2] > 0
    ulp = checks["float32"]["float32_rounding"]["value"]
    assert 0.0 < ulp <= 0.5 + 2**-20


def test_verify_says_why_odd_d_model_has_no_constant_norm(client: Client) -> None:
    report = client.get("/v1/verify?d_model=7&seq_len=16").json()
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("constant_norm", "offset_invariant_dot"):
        # Not measured, so neither true nor false (API.md §2): null, with the reason.
        assert checks[name]["holds"] is None
        assert checks[name]["value"] is None
        assert checks[name]["detail"].startswith("does not apply")
        assert "odd d_model" in checks[name]["detail"]
    # What still applies is measured and holds.
    assert checks["relative_rotation"]["holds"] is True
    assert checks["relative_rotation"]["value"] is not None
    assert report["passed"] is True


def test_verify_at_the_top_of_the_position_range(client: Client) -> None:
    report = client.get("/v1/verify?d_model=16&seq_len=64&offset=2147483584").json()
    checks = {c["name"]: c for c in report["checks"]}
    assert report["passed"] is True
    # float64 formulas lose ~2^-52·2^31 at these angles; the served table does not.
    assert checks["formula_equivalence"]["value"] > 1e-8
    assert checks["float32_rounding"]["value"] <= 0.5 + 2**-20


def test_verify_of_one_row_reports_what_cannot_be_measured(client: Client) -> None:
    report = client.get("/v1/verify?d_model=4&seq_len=1").json()
    statistics = {s["name"]: s["value"] for s in report["statistics"]}
    assert statistics["closest_pair"] is None
    unique = next(c for c in report["checks"] if c["name"] == "unique_positions")
    assert unique["value"] is None and "does not apply: a single row" in unique["detail"]


def test_verify_work_is_limited(client: Client) -> None:
    response = client.get("/v1/verify?d_model=65536&seq_len=1024")
    assert response.json()["type"] == "urn:posenc:problem:limit-exceeded"
