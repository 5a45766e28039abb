"""POST /v1/verify: faulty tables built as real code builds them, diagnosed over HTTP."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import SinusoidalParams, table
from posenc.schemes.sinusoidal.conformance import check
from tests import faulty_tables as faulty
from tests.conftest import Client


def npy_body(values: np.ndarray) -> dict[str, Any]:
    buffer = io.BytesIO()
    np.save(buffer, values)
    return {"content": buffer.getvalue(), "headers": {"Content-Type": "application/x-npy"}}


def raw_body(values: np.ndarray) -> dict[str, Any]:
    return {
        "content": values.astype(values.dtype.newbyteorder("<")).tobytes(),
        "headers": {
            "Content-Type": "application/octet-stream",
            "X-Array-Shape": ",".join(map(str, values.shape)),
            "X-Array-Dtype": str(values.dtype),
        },
    }


def json_body(values: np.ndarray) -> dict[str, Any]:
    # repr of each value's own type: the shortest digits that parse back to it.
    data = [[float(repr(v).split("(")[-1].rstrip(")")) for v in row] for row in values]
    return {"json": {"data": data}}


BODIES: dict[str, Callable[[np.ndarray], dict[str, Any]]] = {
    "npy": npy_body,
    "bin": raw_body,
    "json": json_body,
}

CASES: dict[str, tuple[Callable[[], np.ndarray], str, list[str]]] = {
    "float32 angles": (lambda: faulty.float32_angles(64, 1024), "", ["angle_precision"]),
    "bfloat16 inverse frequencies": (
        lambda: faulty.bfloat16_inverse_frequencies(64, 256),
        "",
        ["angle_precision"],
    ),
    "bfloat16 positions": (lambda: faulty.bfloat16_positions(32, 600), "", ["collapsed_positions"]),
    "split sent as interleaved": (
        lambda: faulty.correct(64, 64, layout="split"),
        "",
        ["layout_mismatch"],
    ),
    "sin and cos swapped": (lambda: faulty.sin_cos_swapped(64, 64), "", ["layout_mismatch"]),
    "base 500000 sent as 10000": (
        lambda: faulty.correct(64, 64, base=500000.0),
        "",
        ["base_mismatch"],
    ),
    "correct float32": (lambda: faulty.correct(64, 128), "", ["value_rounding"]),
    "correct float16, odd d_model": (
        lambda: faulty.correct(63, 128, "float16"),
        "",
        ["value_rounding"],
    ),
    "float32 angles at a million": (
        lambda: faulty.float32_angles(32, 64, 10**6),
        "&offset=1000000",
        ["angle_precision"],
    ),
}


@pytest.mark.parametrize("body_format", list(BODIES))
@pytest.mark.parametrize("case", list(CASES))
def test_each_fault_gets_its_exact_diagnosis(client: Client, case: str, body_format: str) -> None:
    build, extra, expected = CASES[case]
    values = build()
    dtype = f"&dtype={values.dtype}" if body_format == "json" else ""
    url = f"/v1/verify?d_model={values.shape[1]}{extra}{dtype}"
    response = client.post(url, **BODIES[body_format](values))
    assert response.status_code == 200, response.text
    report = response.json()
    assert [finding["name"] for finding in report["diagnosis"]] == expected
    assert len(report["error_by_position"]) == len(values)
    assert report["params"]["dtype"] == str(values.dtype)


def test_the_float32_recipe_is_told_how_many_bits_its_angles_carry(client: Client) -> None:
    report = client.post("/v1/verify?d_model=64", **npy_body(faulty.float32_angles(64, 1024)))
    finding = report.json()["diagnosis"][0]
    assert 23 <= finding["evidence"]["implied_bits"] <= 27
    assert "float32" in finding["summary"]
    assert report.json()["first_bad_position"] is not None


def test_bfloat16_frequencies_are_told_apart_from_float32_angles(client: Client) -> None:
    values = faulty.bfloat16_inverse_frequencies(64, 256)
    finding = client.post("/v1/verify?d_model=64", **npy_body(values)).json()["diagnosis"][0]
    assert finding["evidence"]["implied_bits"] < 12 and "bfloat16" in finding["summary"]


def test_base_mismatch_reports_the_fitted_base(client: Client) -> None:
    values = faulty.correct(64, 64, base=500000.0)
    finding = client.post("/v1/verify?d_model=64", **raw_body(values)).json()["diagnosis"][0]
    assert finding["evidence"]["fitted_base"] == 500000.0


def test_layout_mismatch_names_what_matched(client: Client) -> None:
    values = faulty.sin_cos_swapped(64, 64)
    finding = client.post("/v1/verify?d_model=64", **raw_body(values)).json()["diagnosis"][0]
    assert finding["evidence"]["matches"] == "interleaved layout with sin and cos exchanged"


def test_collapsed_positions_start_where_bfloat16_runs_out_of_bits(client: Client) -> None:
    values = faulty.bfloat16_positions(32, 600)
    report = client.post("/v1/verify?d_model=32", **npy_body(values)).json()
    assert report["diagnosis"][0]["evidence"]["first_collapsed_position"] == 257
    assert report["first_bad_position"] == 257


def test_plotly_draws_the_error_on_a_log_scale(client: Client) -> None:
    values = faulty.float32_angles(16, 100)
    figure = client.post("/v1/verify?d_model=16&format=plotly", **npy_body(values)).json()
    assert figure["layout"]["yaxis"]["type"] == "log"
    assert len(figure["data"][0]["y"]) == 100


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 80),
    st.floats(2.0, 1e6),
    st.sampled_from(["interleaved", "split"]),
    st.integers(0, 2**31 - 200),
    st.sampled_from(["float16", "float32", "float64"]),
)
def test_any_correctly_rounded_table_is_diagnosed_clean(
    d_model: int, base: float, layout: str, offset: int, dtype: str
) -> None:
    params = SinusoidalParams(d_model=d_model, base=base, layout=layout)  # type: ignore[arg-type]
    values = table(params, 96, offset, dtype)  # type: ignore[arg-type]
    result = check(params, values, offset)
    assert [finding.name for finding in result.diagnosis] == ["value_rounding"]
    assert result.first_bad_position is None


@pytest.mark.parametrize(
    ("request_kwargs", "named"),
    [
        (
            {
                "content": b"\x00" * 12,
                "headers": {
                    "Content-Type": "application/octet-stream",
                    "X-Array-Shape": "2,4",
                    "X-Array-Dtype": "float32",
                },
            },
            "X-Array-Shape",
        ),
        (
            {
                "content": b"\x00" * 32,
                "headers": {"Content-Type": "application/octet-stream", "X-Array-Shape": "2,4"},
            },
            "X-Array-Shape",
        ),
        (
            {
                "content": b"\x00" * 32,
                "headers": {
                    "Content-Type": "application/octet-stream",
                    "X-Array-Shape": "2,4",
                    "X-Array-Dtype": "int8",
                },
            },
            "X-Array-Dtype",
        ),
        (
            {"content": b"\x93NUMPY garbage", "headers": {"Content-Type": "application/x-npy"}},
            "body",
        ),
        ({"json": {"data": [[1.0, 2.0, 3.0, 4.0], [1.0]]}}, "data"),
        ({"json": {"rows": [[1.0, 2.0, 3.0, 4.0]]}}, "body"),
        ({"content": b"<xml/>", "headers": {"Content-Type": "text/xml"}}, "body"),
        ({"json": {"data": [[1.0, 2.0, 3.0]]}}, "body"),
    ],
)
def test_bad_bodies_are_422_naming_what_is_wrong(
    client: Client, request_kwargs: dict[str, Any], named: str
) -> None:
    response = client.post("/v1/verify?d_model=4", **request_kwargs)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][1] == named


def test_a_shape_that_disagrees_with_the_parameters_names_the_expected_shape(
    client: Client,
) -> None:
    response = client.post("/v1/verify?d_model=8", **npy_body(faulty.correct(4, 3)))
    assert "[3, 8]" in response.json()["detail"]


def test_nan_in_a_table_is_refused_with_its_row(client: Client) -> None:
    values = faulty.correct(4, 3).copy()
    values[2, 1] = np.nan
    response = client.post("/v1/verify?d_model=4", **npy_body(values))
    assert response.status_code == 422 and "row 2" in response.json()["detail"]


def test_fortran_ordered_npy_is_read_correctly(client: Client) -> None:
    values = np.asfortranarray(faulty.correct(16, 8))
    report = client.post("/v1/verify?d_model=16", **npy_body(values)).json()
    assert [f["name"] for f in report["diagnosis"]] == ["value_rounding"]


def test_verify_bodies_are_bounded(client_with: Callable[..., Client]) -> None:
    client = client_with(max_body_bytes=1000)
    response = client.post("/v1/verify?d_model=64", **npy_body(faulty.correct(64, 64)))
    assert response.status_code == 413


@pytest.mark.parametrize(
    ("path", "query", "seq_len", "bad_row"),
    [
        # As many heads as positions: the positions are still the second axis, not the first.
        ("/v1/alibi", "num_heads=4", 4, (slice(None), 2)),
        # Two positions of cos_sin (2, n, d): the first axis is cos/sin, not positions.
        ("/v1/rope", "d_model=8&component=cos_sin", 2, (0, 1)),
    ],
)
def test_the_position_axis_does_not_depend_on_coincident_lengths(
    client: Client, path: str, query: str, seq_len: int, bad_row: tuple[Any, ...]
) -> None:
    offset = 10
    served = client.get(f"{path}/table?{query}&seq_len={seq_len}&offset={offset}&format=npy")
    values = np.load(io.BytesIO(served.content)).copy()
    values[bad_row] += 0.25
    report = client.post(f"{path}/verify?{query}&offset={offset}", **npy_body(values)).json()
    assert len(report["error_by_position"]) == seq_len
    assert report["first_bad_position"] == offset + bad_row[1]
    assert report["conforms"] is False


def test_the_gets_seq_len_may_come_along_and_must_then_be_the_bodys_rows(client: Client) -> None:
    """A client sends the query it used for the GET: its seq_len is taken when it is the body's
    rows, and named as inconsistent when it is not (API.md §2)."""
    served = table(SinusoidalParams(d_model=8), 16, 0, "float32")
    same = client.post("/v1/sinusoidal/verify?d_model=8&seq_len=16", **npy_body(served))
    assert same.status_code == 200
    assert same.json()["conforms"] is True and same.json()["params"]["seq_len"] == 16
    other = client.post("/v1/sinusoidal/verify?d_model=8&seq_len=17", **npy_body(served))
    assert other.status_code == 422
    problem = other.json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"][-1] == "seq_len"
    assert "16 rows" in problem["detail"]


def test_an_array_without_rows_takes_no_seq_len(client: Client) -> None:
    slopes = client.get("/v1/alibi/table?num_heads=4&seq_len=1&component=slopes&format=npy")
    body = {"content": slopes.content, "headers": {"Content-Type": "application/x-npy"}}
    plain = client.post("/v1/alibi/verify?num_heads=4&component=slopes", **body)
    assert plain.status_code == 200 and plain.json()["conforms"] is True
    given = client.post("/v1/alibi/verify?num_heads=4&component=slopes&seq_len=8", **body)
    assert given.status_code == 422
    assert given.json()["errors"][0]["loc"][-1] == "seq_len"


def test_a_bucket_off_by_one_is_found_and_never_called_correct(client: Client) -> None:
    """Integer tables must be equal: a bucket one off is the first bad position, and the
    report does not call the table correct (it once said value_rounding, 'the table is
    correct', beside conforms: false)."""
    served = client.get("/v1/t5/table?seq_len=12&format=npy")
    buckets = np.load(io.BytesIO(served.content))
    buckets[7, 3] += 1
    report = client.post("/v1/t5/verify", **npy_body(buckets)).json()
    assert report["conforms"] is False
    assert report["first_bad_position"] == 7
    assert "value_rounding" not in [finding["name"] for finding in report["diagnosis"]]
    exact = client.post("/v1/t5/verify", **npy_body(np.load(io.BytesIO(served.content))))
    assert exact.json()["conforms"] is True and exact.json()["first_bad_position"] is None


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("/v1/rope/verify?d_model=4&offset=70000&dtype=float16&component=angle", [[0.0, 0.0]]),
        ("/v1/index/verify?d_model=1&offset=70000&dtype=float16", [[0.0]]),
    ],
)
def test_a_float16_table_of_values_past_65504_is_refused_not_called_conforming(
    client: Client, url: str, data: list[list[float]]
) -> None:
    """The served values are infinite in float16, so no ulp can be measured: it once answered
    conforms: true for zeros (and a null max_ulp_error for the index)."""
    response = client.post(url, json={"data": data})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"][-1] == "dtype"
