"""Operations per scheme (API.md §2): exact parameters, the alias with the same bytes and ETag,
methods answered with Allow, and a scheme added by its declaration alone."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from app.main import create_app
from posenc import adapters, registry
from posenc.cost import Cost
from posenc.declare import Scheme, check_ranges, param
from posenc.verify import Check, Report
from tests.conftest import Client


def test_every_scheme_has_its_operations_in_the_document(client: Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for scheme in registry.SCHEMES:
        for endpoint in ("table", "encode", "verify"):
            operation = paths[f"/v1/{scheme.name}/{endpoint}"]["get"]
            assert operation["tags"] == [scheme.name]
        assert ("similarity" in scheme.endpoints) == (f"/v1/{scheme.name}/similarity" in paths)
        assert "post" in paths[f"/v1/{scheme.name}/encode"]
        assert "post" in paths[f"/v1/{scheme.name}/verify"]
    assert not any(path in paths for path in ("/v1/table", "/v1/encode", "/v1/verify"))


def test_each_operation_takes_exactly_its_schemes_parameters(client: Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for scheme in registry.SCHEMES:
        listed = {p["name"]: p for p in paths[f"/v1/{scheme.name}/table"]["get"]["parameters"]}
        declared = {f.name for f in scheme.fields()}
        assert declared <= set(listed)
        others = {f.name for s in registry.SCHEMES for f in s.fields()} - declared
        assert not others & set(listed), f"{scheme.name} lists another scheme's parameters"
        for f in scheme.fields():
            required = f.default is dataclasses.MISSING
            assert listed[f.name].get("required", False) == required, (scheme.name, f.name)


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        (
            "/v1/table?d_model=6&seq_len=3&format=bin",
            "/v1/sinusoidal/table?d_model=6&seq_len=3&format=bin",
        ),
        (
            "/v1/table?scheme=rope&d_model=8&seq_len=4&scaling=linear&factor=2",
            "/v1/rope/table?d_model=8&seq_len=4&scaling=linear&factor=2",
        ),
        ("/v1/encode?scheme=alibi&positions=0,3,9", "/v1/alibi/encode?positions=0,3,9"),
        ("/v1/similarity?d_model=4&seq_len=5", "/v1/sinusoidal/similarity?d_model=4&seq_len=5"),
        ("/v1/verify?scheme=t5&seq_len=9", "/v1/t5/verify?seq_len=9"),
    ],
)
def test_the_alias_answers_the_same_bytes_and_etag_and_links_the_canonical_url(
    client: Client, alias: str, canonical: str
) -> None:
    old, new = client.get(alias), client.get(canonical)
    assert old.status_code == new.status_code == 200
    assert old.content == new.content
    assert old.headers["etag"] == new.headers["etag"]
    assert old.headers["link"] == f'<{canonical}>; rel="canonical"'
    # and a tag from one form revalidates the other
    again = client.get(alias, headers={"If-None-Match": new.headers["etag"]})
    assert again.status_code == 304


def test_a_parameter_of_another_scheme_is_not_applicable_on_either_form(client: Client) -> None:
    for url in (
        "/v1/alibi/table?seq_len=3&d_model=4",
        "/v1/table?scheme=alibi&seq_len=3&d_model=4",
    ):
        problem = client.get(url).json()
        assert problem["type"] == "urn:posenc:problem:not-applicable"
        assert problem["errors"][0]["loc"] == ["query", "d_model"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/sinusoidal/table", {"GET"}),
        ("DELETE", "/v1/rope/encode", {"GET", "POST"}),
        ("PATCH", "/v1/t5/verify", {"GET", "POST"}),
        ("POST", "/v1/schemes", {"GET"}),
    ],
)
def test_a_method_an_operation_does_not_take_is_405_with_allow(
    client: Client, method: str, path: str, allowed: set[str]
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed
    assert response.headers["content-type"] == "application/problem+json"


def test_options_says_which_methods_a_path_takes(client: Client) -> None:
    response = client.request("OPTIONS", "/v1/rope/verify")
    assert response.status_code == 204
    assert {m.strip() for m in response.headers["allow"].split(",")} == {"GET", "POST", "OPTIONS"}


# --- a scheme added by its declaration alone ---------------------------------------------


@dataclass(frozen=True)
class StairParams:
    """A toy: column j of row p holds (p + j) // step."""

    d_model: int = param(doc="width", ge=1, le=64)
    step: int = param(2, doc="rows per stair", ge=1, le=100)

    def __post_init__(self) -> None:
        check_ranges(self)


def _stairs(params: Any, positions: npt.NDArray[np.int64], dtype: str, component: str) -> Any:
    columns = np.arange(params.d_model)
    return ((positions[:, None] + columns[None, :]) // params.step).astype(dtype)


def _stairs_verify(params: Any, array: npt.NDArray[Any], positions: Any) -> Report:
    rising = bool(np.all(np.diff(array, axis=0) >= 0))
    check = Check("monotone", rising, "rises", float(rising), 1.0, "rows never fall")
    return Report((check,), ())


TOY = Scheme(
    "stairs",
    "a toy scheme, declared in a test",
    StairParams,
    lambda p, n, c: (n, p.d_model),
    _stairs,
    lambda p, n, dtype, c: Cost(n * p.d_model * 16 + 2**20, n * p.d_model),
    _stairs_verify,
    lambda p, n: Cost(n * p.d_model * 16 + 2**20, n * p.d_model),
    examples=({"d_model": 3},),
    vectors=lambda p, positions, vector: _stairs(p, positions, "float64", ""),
    conformance=adapters.conformance_of(_stairs),
    conformance_cost=adapters.conformance_cost_of(
        lambda p, n, dtype, c: Cost(n * p.d_model * 16 + 2**20, n * p.d_model)
    ),
)


@pytest.fixture
def with_toy() -> Client:
    client = Client()
    client.app = create_app(schemes=(*registry.SCHEMES, TOY))
    return client


def test_a_scheme_declared_in_one_place_appears_everywhere(with_toy: Client) -> None:
    listed = {s["name"]: s for s in with_toy.get("/v1/schemes").json()["schemes"]}
    assert listed["stairs"]["parameters"][1]["default"] == 2
    paths = with_toy.get("/openapi.json").json()["paths"]
    assert {f"/v1/stairs/{e}" for e in ("table", "encode", "similarity", "verify")} <= set(paths)
    table = with_toy.get("/v1/stairs/table?d_model=3&seq_len=4&step=2&format=json").json()
    assert table["data"] == [[0, 0, 1], [0, 1, 1], [1, 1, 2], [1, 2, 2]]
    encoded = with_toy.get("/v1/stairs/encode?d_model=3&positions=3").json()
    assert encoded["data"] == [table["data"][3]]
    assert with_toy.get("/v1/stairs/similarity?d_model=3&seq_len=4").status_code == 200
    assert with_toy.get("/v1/stairs/verify?d_model=3&seq_len=6").json()["passed"] is True
    assert with_toy.get("/v1/table?scheme=stairs&d_model=3&seq_len=4").status_code == 200
    served = np.array(table["data"], dtype=np.float32)
    report = with_toy.post(
        "/v1/stairs/verify?d_model=3",
        content=served.tobytes(),
        headers={
            "Content-Type": "application/octet-stream",
            "X-Array-Shape": "4,3",
            "X-Array-Dtype": "float32",
        },
    ).json()
    assert report["conforms"] is True and report["diagnosis"][0]["name"] == "value_rounding"
    wrong = served.copy()
    wrong[2] = wrong[1]
    faulty = with_toy.post(
        "/v1/stairs/verify?d_model=3",
        content=wrong.tobytes(),
        headers={
            "Content-Type": "application/octet-stream",
            "X-Array-Shape": "4,3",
            "X-Array-Dtype": "float32",
        },
    ).json()
    assert faulty["conforms"] is False and faulty["first_bad_position"] == 2
    assert faulty["diagnosis"][0]["name"] == "collapsed_positions"


@pytest.mark.parametrize(
    "url",
    [
        "/v1/index/table?d_model=2&seq_len=2&offset=70000&dtype=float16",
        "/v1/index/similarity?d_model=2&seq_len=300&offset=17&dtype=float16&metric=dot"
        "&reference=2812&format=png",
    ],
)
def test_values_past_float16s_range_are_refused_not_served_as_infinities(
    client: Client, url: str
) -> None:
    problem = client.get(url).json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"] == ["query", "dtype"]


def test_the_canonical_link_is_a_url_that_means_the_same_query(client: Client) -> None:
    # "+" in a value is a space once decoded: the link must keep it escaped.
    response = client.get("/v1/similarity?scheme=rope&d_model=2&seq_len=3&vector=1e%2B0,0")
    assert response.status_code == 200
    link = response.headers["link"]
    assert link == '</v1/rope/similarity?d_model=2&seq_len=3&vector=1e%2B0,0>; rel="canonical"'
    followed = client.get(link[1 : link.index(">")])
    assert followed.content == response.content


def test_the_older_post_takes_the_scheme_from_the_query_and_links_the_canonical_url(
    client: Client,
) -> None:
    body = {"d_model": 4, "positions": [0, 5]}
    old = client.post("/v1/encode?scheme=rope&format=json", json=body)
    new = client.post("/v1/rope/encode?format=json", json=body)
    assert old.status_code == new.status_code == 200
    assert old.json() == new.json()
    assert old.headers["link"] == '</v1/rope/encode?format=json>; rel="canonical"'
    in_body = client.post("/v1/encode?format=json", json={**body, "scheme": "rope"})
    assert in_body.json() == new.json()


def test_the_older_post_refuses_two_different_schemes(client: Client) -> None:
    body = {"scheme": "sinusoidal", "d_model": 4, "positions": [0, 5]}
    problem = client.post("/v1/encode?scheme=rope", json=body).json()
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["errors"][0]["loc"][-1] == "scheme"


@pytest.mark.parametrize("path", ["/v1/rope/encode?", "/v1/encode?scheme=rope&"])
def test_repeated_items_of_a_list_parameter_are_all_kept_on_either_form(
    client: Client, path: str
) -> None:
    """``positions=3&positions=5`` is ``positions=3,5``, as the parameter's description says:
    both items, not the last one alone (a canonical GET kept the last one for a while)."""
    query = "d_model=4&format=json&scaling=longrope&original_max_position_embeddings=4"
    repeated = client.get(f"{path}{query}&positions=3&positions=5&short_factor=1&short_factor=2"
                          "&long_factor=3&long_factor=4").json()  # fmt: skip
    listed = client.get(f"{path}{query}&positions=3,5&short_factor=1,2&long_factor=3,4").json()
    assert repeated == listed
    assert repeated["params"]["positions"] == [3, 5]
    assert repeated["params"]["short_factor"] == [1.0, 2.0]


def test_a_canonical_get_refuses_scheme_as_a_parameter_it_does_not_take(client: Client) -> None:
    response = client.get("/v1/rope/table?d_model=4&seq_len=2&scheme=sinusoidal")
    assert response.status_code == 422
    assert response.json()["detail"].startswith("scheme:")
