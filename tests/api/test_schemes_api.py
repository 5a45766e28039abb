"""Every scheme through every endpoint and format; parameters that do not apply are refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import Client

QUERIES = {
    "sinusoidal": "d_model=6&seq_len=5",
    "tensor2tensor": "d_model=7&seq_len=5&convention=tensor2tensor",
    "fairseq": "d_model=6&seq_len=5&convention=fairseq",
    "rope": "scheme=rope&d_model=8&seq_len=5",
    "rope-yarn": "scheme=rope&d_model=8&seq_len=5&scaling=yarn&factor=4"
    "&original_max_position_embeddings=64",
    "rope-longrope": "scheme=rope&d_model=8&seq_len=5&scaling=longrope&short_factor=1,1,2,2"
    "&long_factor=1,2,4,8&original_max_position_embeddings=4&factor=2",
    "rope-proportional": "scheme=rope&d_model=8&seq_len=5&rotary_pairs=1",
    "alibi": "scheme=alibi&num_heads=3&seq_len=5",
    "t5": "scheme=t5&seq_len=5",
    "sinusoidal2d": "scheme=sinusoidal2d&d_model=8&grid=2,3",
    "sinusoidal3d": "scheme=sinusoidal3d&d_model=12&grid=2,2,2&convention=positional-encodings",
    "index": "scheme=index&d_model=4&seq_len=5",
    "normalized": "scheme=normalized&d_model=4&seq_len=5",
    "binary": "scheme=binary&d_model=4&seq_len=5",
}
FORMATS = ["json", "npy", "bin", "csv", "plotly", "png"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(QUERIES))
def test_every_scheme_serves_its_table_in_every_format(client: Client, name: str, fmt: str) -> None:
    response = client.get(f"/v1/table?{QUERIES[name]}&format={fmt}")
    assert response.status_code == 200, response.text
    assert response.headers["etag"]


@pytest.mark.parametrize("name", list(QUERIES))
def test_every_scheme_encodes_chosen_positions(client: Client, name: str) -> None:
    query = QUERIES[name].replace("seq_len=5", "positions=4,0,2")
    if "grid" in query:
        query += "&positions=4,0,2"
    response = client.get(f"/v1/encode?{query}")
    assert response.status_code == 200, response.text
    assert 3 in response.json()["shape"]


# The teaching baselines are served to show what they lack: their failures are pinned below.
BASELINES = ("index", "normalized", "binary")


@pytest.mark.parametrize("name", [n for n in QUERIES if n not in BASELINES])
def test_every_scheme_passes_its_verify(client: Client, name: str) -> None:
    report = client.get(f"/v1/verify?{QUERIES[name]}").json()
    assert report["checks"]
    failing = [check for check in report["checks"] if check["holds"] is False]
    assert failing == []
    assert report["passed"] is True


# One position: the checks that need two (or three) rows say that they do not apply, and why.
ONE_POSITION = {
    "sinusoidal": (
        "d_model=6&seq_len=1",
        {"unique_positions", "relative_rotation", "offset_invariant_dot"},
    ),
    "rope": ("scheme=rope&d_model=8&seq_len=1", {"relative_inner_product"}),
    "alibi": ("scheme=alibi&num_heads=3&seq_len=1", {"slopes", "monotone_penalty"}),
    "t5": ("scheme=t5&seq_len=1", {"symmetric"}),
    "t5 causal": ("scheme=t5&seq_len=1&bidirectional=false", {"causal"}),
    "sinusoidal2d": ("scheme=sinusoidal2d&d_model=8&grid=1,1", {"unique_positions"}),
    "index": ("scheme=index&d_model=4&seq_len=1", {"unique_positions", "relative_rotation"}),
}


@pytest.mark.parametrize("name", list(ONE_POSITION))
def test_checks_that_do_not_apply_say_so_and_why(client: Client, name: str) -> None:
    query, not_applicable = ONE_POSITION[name]
    report = client.get(f"/v1/verify?{query}").json()
    assert report["passed"] is True
    said = {c["name"] for c in report["checks"] if c["detail"].count("does not apply")}
    assert said == not_applicable
    for check in report["checks"]:
        if check["name"] in not_applicable:
            reason = check["detail"].split("does not apply")[1]
            assert len(reason) > len(": one"), check["detail"]


def test_float32_rounding_holds_the_readme_bound_of_half_an_ulp_and_2_to_the_minus_14(
    client: Client,
) -> None:
    for query in (QUERIES["sinusoidal"], QUERIES["rope"], QUERIES["tensor2tensor"]):
        for dtype in ("float32", "float16"):
            report = client.get(f"/v1/verify?{query}&dtype={dtype}").json()
            rounding = next(c for c in report["checks"] if c["name"] == "float32_rounding")
            assert rounding["tolerance"] == 0.5 + 2**-14
            assert rounding["holds"] and rounding["value"] <= 0.5 + 2**-14


@pytest.mark.parametrize(
    ("name", "fails"),
    [
        ("index", {"bounded", "relative_rotation"}),
        ("normalized", {"relative_rotation"}),
        ("binary", {"relative_rotation"}),
    ],
)
def test_teaching_baselines_show_what_they_lack(client: Client, name: str, fails: set[str]) -> None:
    report = client.get(f"/v1/verify?{QUERIES[name]}").json()
    failing = {check["name"] for check in report["checks"] if check["holds"] is False}
    assert failing == fails
    assert report["passed"] is False


@pytest.mark.parametrize("name", [n for n in QUERIES if n not in ("alibi", "t5")])
def test_similarity_for_every_scheme_with_vectors(client: Client, name: str) -> None:
    response = client.get(f"/v1/similarity?{QUERIES[name]}&format=bin")
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("name", [n for n in QUERIES if n not in ("alibi", "t5")])
@pytest.mark.parametrize("reference", [0, 3])
def test_similarity_to_a_reference_is_that_row_of_the_matrix(
    client: Client, name: str, reference: int
) -> None:
    # Row p of S, for every scheme: normalized's PE(p) depends on the table around it.
    matrix = client.get(f"/v1/similarity?{QUERIES[name]}&metric=dot&format=json").json()
    row = client.get(
        f"/v1/similarity?{QUERIES[name]}&metric=dot&reference={reference}&format=json"
    ).json()
    assert row["shape"] == [matrix["shape"][0]]
    assert row["data"] == matrix["data"][reference]


def test_a_grid_reference_outside_the_grid_is_named(client: Client) -> None:
    response = client.get(f"/v1/similarity?{QUERIES['sinusoidal2d']}&reference=6")
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["loc"][-1] == "reference"
    # In its schema's range, so not a malformed request: two parameters that disagree.
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"


def test_every_listed_parameter_type_is_the_one_its_schema_states(client: Client) -> None:
    """/v1/schemes and the OpenAPI document describe each parameter alike (a ``Literal`` whose
    spelling held "int" was once listed as an integer)."""
    document = client.get("/openapi.json").json()
    json_type = {"boolean": "boolean", "integer": "integer", "number": "number", "string": "string"}
    for scheme in client.get("/v1/schemes").json()["schemes"]:
        operation = document["paths"][f"/v1/{scheme['name']}/table"]["get"]
        schemas = {p["name"]: p["schema"] for p in operation["parameters"]}
        for parameter in scheme["parameters"]:
            options = schemas[parameter["name"]].get("anyOf", [schemas[parameter["name"]]])
            stated = {o["type"] for o in options if o.get("type") not in (None, "null")}
            if stated == {"array"}:
                items = {o["items"]["type"] for o in options if o.get("type") == "array"}
                stated = {f"{json_type[t]} list" for t in items}
            assert stated == {parameter["type"]}, (scheme["name"], parameter["name"])


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_similarity_of_pairwise_schemes_is_refused_with_the_reason(
    client: Client, name: str
) -> None:
    problem = client.get(f"/v1/similarity?{QUERIES[name]}").json()
    assert problem["type"] == "urn:posenc:problem:not-applicable"
    assert "per-position vectors" in problem["detail"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("d_model=4&seq_len=3&num_heads=2", "num_heads"),
        ("d_model=4&seq_len=3&scaling=linear", "scaling"),
        ("d_model=4&seq_len=3&component=cos", "component"),
        ("scheme=alibi&seq_len=3&d_model=4", "d_model"),
        ("scheme=alibi&seq_len=3&base=100", "base"),
        ("scheme=t5&seq_len=3&dtype=float32", "dtype"),
        ("scheme=t5&seq_len=3&layout=split", "layout"),
        ("scheme=rope&d_model=4&seq_len=3&convention=fairseq", "convention"),
        ("scheme=sinusoidal2d&d_model=8&grid=2,2&seq_len=4", "seq_len"),
        ("scheme=index&d_model=4&seq_len=3&base=100", "base"),
    ],
)
def test_parameters_that_do_not_apply_are_refused(client: Client, query: str, param: str) -> None:
    problem = client.get(f"/v1/table?{query}").json()
    assert problem["status"] == 422
    assert problem["type"] == "urn:posenc:problem:not-applicable"
    assert problem["errors"][0]["loc"] == ["query", param]


def test_rope_with_odd_d_model_says_it_must_be_even(client: Client) -> None:
    problem = client.get("/v1/table?scheme=rope&d_model=7&seq_len=3").json()
    assert problem["status"] == 422 and "multiple of 2" in problem["detail"]
    assert problem["errors"][0]["loc"] == ["query", "d_model"]


def test_rope_scaling_without_its_required_parameter_names_it(client: Client) -> None:
    problem = client.get("/v1/table?scheme=rope&d_model=8&seq_len=3&scaling=yarn&factor=2").json()
    assert problem["errors"][0]["loc"] == ["query", "original_max_position_embeddings"]


def test_rope_rotary_pairs_turn_the_first_pairs_and_hold_the_others_still(
    client: Client,
) -> None:
    # transformers' proportional rope: the exponents stay 2i/d_model (10000^(−2/8) = 0.1);
    # past rotary_pairs, ω = 0.
    query = "/v1/rope/table?d_model=8&seq_len=4&dtype=float64&format=json"
    cos, sin = np.array(client.get(f"{query}&rotary_pairs=2").json()["data"])
    whole_cos, whole_sin = np.array(client.get(query).json()["data"])
    turning = np.array([True, True, False, False] * 2)
    assert np.array_equal(cos[:, turning], whole_cos[:, turning])
    assert np.array_equal(sin[:, turning], whole_sin[:, turning])
    assert (cos[:, ~turning] == 1).all() and (sin[:, ~turning] == 0).all()
    inv_freq = client.get(f"{query}&rotary_pairs=2&component=inv_freq").json()["data"]
    assert inv_freq == [1.0, 0.1, 0.0, 0.0]
    report = client.get("/v1/rope/verify?d_model=8&seq_len=64&rotary_pairs=2").json()
    assert all(check["holds"] for check in report["checks"]), report
    # Below its range by the schema; past d_model/2 by the rule its description states.
    for given, kind in (("0", "about:blank"), ("5", "urn:posenc:problem:inconsistent-parameters")):
        problem = client.get(f"{query}&rotary_pairs={given}").json()
        assert problem["status"] == 422 and problem["type"] == kind
        assert problem["errors"][0]["loc"] == ["query", "rotary_pairs"]


def test_rope_rotates_posted_vectors(client: Client) -> None:
    body = {
        "scheme": "rope",
        "d_model": 4,
        "positions": [0, 1],
        "vectors": [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]],
        "dtype": "float64",
    }
    data = client.post("/v1/encode", json=body).json()["data"]
    assert data[0] == [1.0, 0.0, 0.0, 0.0]
    assert data[1][0] == pytest.approx(0.5403023058681398) and data[1][2] == pytest.approx(
        0.8414709848078965
    )


def test_schemes_lists_every_scheme_with_parameters_and_components(client: Client) -> None:
    schemes = {s["name"]: s for s in client.get("/v1/schemes").json()["schemes"]}
    assert set(schemes) == set(QUERIES) - {
        "tensor2tensor",
        "fairseq",
        "rope-yarn",
        "rope-longrope",
        "rope-proportional",
    } | {"sinusoidal"}
    assert schemes["rope"]["components"] == ["cos_sin", "cos", "sin", "angle", "inv_freq"]
    scaling = next(p for p in schemes["rope"]["parameters"] if p["name"] == "scaling")
    assert "yarn" in scaling["choices"]


def test_different_schemes_with_equal_parameters_never_share_a_body(client: Client) -> None:
    index = client.get("/v1/table?scheme=index&d_model=2&seq_len=3")
    binary = client.get("/v1/table?scheme=binary&d_model=2&seq_len=3")
    assert index.headers["etag"] != binary.headers["etag"]
    assert index.json()["data"] != binary.json()["data"]


def _rotated(v: list[float], position: int) -> np.ndarray:
    """R_p v for the default rope (split halves, base 10000), in float64: an independent model."""
    half = len(v) // 2
    angles = position * 10000.0 ** (-np.arange(0, len(v), 2) / len(v))
    x1, x2 = np.array(v[:half]), np.array(v[half:])
    c, s = np.cos(angles), np.sin(angles)
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s])


def test_rope_similarity_compares_rotated_queries_with_rotated_keys(client: Client) -> None:
    q, k = [0.3, -1.2, 0.5, 2.0], [1.1, 0.4, -0.7, 0.2]
    vectors = f"vector={','.join(map(str, q))}&key={','.join(map(str, k))}"
    base = f"/v1/rope/similarity?d_model=4&seq_len=6&offset=3&metric=dot&format=json&{vectors}"
    matrix = np.array(client.get(base).json()["data"])
    expected = np.array(
        [[_rotated(q, m) @ _rotated(k, n) for n in range(3, 9)] for m in range(3, 9)]
    )
    # Rounded once to float32: within half an ulp (2^-24 relative) of the float64 value.
    np.testing.assert_allclose(matrix, expected, rtol=2**-24, atol=1e-12)
    row = client.get(f"{base}&reference=5").json()
    assert row["data"] == client.get(base).json()["data"][2]
    assert row["params"]["key"] == k
    # q·k depends on m − n alone: every diagonal of the matrix is constant.
    for shift in range(-5, 6):
        diagonal = np.diagonal(matrix, shift)
        assert np.ptp(diagonal) <= 2**-23 * np.abs(diagonal).max()  # one ulp at most


def test_a_key_of_the_wrong_length_is_named(client: Client) -> None:
    problem = client.get("/v1/rope/similarity?d_model=4&seq_len=3&key=1,2").json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"][-1] == "key"
