"""A JSON body the OpenAPI document calls invalid is refused, and one it calls valid is not
refused for its types: the service's validator agrees with a reference one (jsonschema) on the
document's own schemas."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from app import bodies
from app.main import create_app
from posenc.errors import ParameterError
from tests.conftest import Client

_DOCUMENT = create_app().openapi()


def _body_schemas() -> dict[str, dict[str, Any]]:
    """Every JSON body of an operation beyond the common four (…/config), as the document
    publishes it."""
    found = {}
    for path, operations in _DOCUMENT["paths"].items():
        body = operations.get("post", {}).get("requestBody", {})
        schema = body.get("content", {}).get("application/json", {}).get("schema")
        scheme_operation = path.count("/") == 3  # /v1/{scheme}/{encode|verify}: pydantic's
        if schema and not (scheme_operation and path.endswith(("/encode", "/verify"))):
            found[path] = schema
    return found


SCHEMAS = _body_schemas()
CONFIG = SCHEMAS["/v1/rope/config"]


def _keys(schema: Any) -> set[str]:
    """Every property name the schema mentions, at any depth: the generated bodies use them so
    that they reach the constrained places, not only unknown keys."""
    if isinstance(schema, dict):
        return set(schema.get("properties", {})) | {k for v in schema.values() for k in _keys(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in _keys(v)}
    return set()


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 2**34)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.5, 1.0, 4.0, 10000.0, 1e13])
    | st.sampled_from(["yarn", "llama3", "default", "su", "mrope", "full_attention"])
)


def _json(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """JSON values whose keys are the schema's own (and two strangers), so that generated
    bodies reach the constrained places, not only unknown keys."""
    keys = sorted(_keys(schema) | {"full_attention", "x"})
    return st.recursive(
        _SCALARS | st.sampled_from(["qwen2_vl", "qwen2_5_omni", "pixtral"]),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(keys), inner),
        max_leaves=12,
    )


def _verdicts(value: Any, schema: dict[str, Any]) -> tuple[bool, bool]:
    reference = jsonschema.Draft202012Validator(schema).is_valid(value)
    try:
        bodies.validate(value, schema)
        ours = True
    except ParameterError:
        ours = False
    return reference, ours


@pytest.mark.parametrize("path", sorted(SCHEMAS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_validator_agrees_with_jsonschema_on_every_extra_body(
    path: str, data: st.DataObject
) -> None:
    schema = SCHEMAS[path]
    keys = st.sampled_from(sorted(_keys(schema)))
    body = data.draw(st.dictionaries(keys, _json(schema), max_size=4))
    reference, ours = _verdicts(body, schema)
    assert ours == reference, body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # Found by schemathesis: a null where a number is documented, in a rope dict, and a
        # boolean list in a layer type's rope that no layer uses, were both read leniently.
        ({"head_dim": 8, "rope_parameters": {"x": {"short_factor": True}}}, "short_factor"),
        ({"head_dim": 8, "rope_scaling": "linear"}, "rope_scaling"),
        ({"head_dim": 8, "rope_theta": True}, "rope_theta"),
        ({"head_dim": 8.5}, "head_dim"),
        ({"head_dim": 8, "rope_parameters": {"rope_type": "yarn", "beta_fast": "32"}}, "beta_"),
    ],
)
def test_a_body_the_document_calls_invalid_is_a_422_naming_the_field(
    client: Client, body: dict[str, Any], field: str
) -> None:
    assert not jsonschema.Draft202012Validator(CONFIG).is_valid(body)
    response = client.post("/v1/rope/config", json=body)
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]


def test_a_null_the_document_allows_is_read_as_a_key_left_out(client: Client) -> None:
    body = {"head_dim": 8, "rope_theta": 1.5, "rope_scaling": {"high_freq_factor": None}}
    assert jsonschema.Draft202012Validator(CONFIG).is_valid(body)
    assert client.post("/v1/rope/config", json=body).status_code == 200
    assert client.post("/v1/rope/config", json=[body]).status_code == 422


def test_a_keyword_the_validator_does_not_enforce_is_refused_when_the_app_is_built() -> None:
    for schema in SCHEMAS.values():
        bodies.check_schema(schema)
    assert SCHEMAS, "no extra operation found"
    with pytest.raises(ValueError, match="pattern"):
        bodies.check_schema({"properties": {"name": {"type": "string", "pattern": "^a"}}})


def test_a_null_rope_per_layer_type_is_a_body_the_document_allows() -> None:
    # Beam's and Cohere-Compass's full-attention layers: no rope (issue 34).
    body = {"head_dim": 8, "rope_parameters": {"full_attention": None, "sliding_attention": {}}}
    assert jsonschema.Draft202012Validator(CONFIG).is_valid(body)


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_the_contract_fuzzer_generates_bodies_of_the_config_operation(mode: str) -> None:
    # A nullable rope per layer type once made schemathesis build a schema it could not
    # generate from, under some seeds: tests/live/test_contract_fuzzing.py then fuzzed no body.
    operation = schemathesis.openapi.from_dict(_DOCUMENT)["/v1/rope/config"]["POST"]
    strategy = operation.as_strategy(generation_mode=schemathesis.GenerationMode(mode))
    drawn: list[Any] = []
    for value in (1, 2, 3):

        @seed(value)
        @settings(
            max_examples=20,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def generate(case: Any) -> None:
            drawn.append(case.body)

        generate()
    assert len(drawn) >= 30


@pytest.mark.parametrize("value", [0, 1, 2, 3, 4.0, 4.5, -2, 65536])
def test_the_validator_agrees_with_jsonschema_on_multiple_of(value: float) -> None:
    """multipleOf, as an extra's query states an even d_model: enforced as documented."""
    reference, ours = _verdicts(value, {"type": "number", "multipleOf": 2})
    assert ours == reference
