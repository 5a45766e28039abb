"""What the generated clients call, read from the live OpenAPI document alone.

Nothing here names a scheme or lists a scheme's parameters: every operation of the document is
planned from its own parameter schemas, so the plan follows the document as it changes. What the
plan does know is the contract every operation shares (API.md §3): a `format` parameter whose
`json`, `npy` and `bin` answers hold the same array, a `dtype` parameter, and a `…/verify` that
takes the service's own `…/table` as an `.npy` body and conforms.

>>> example({"anyOf": [{"type": "integer", "minimum": 1, "multipleOf": 4}, {"type": "null"}]}, {})
12
>>> example({"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2}, {})
[4, 4]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

Json = Any
METHODS = ("get", "post", "put", "patch", "delete")
# A size small enough for every call to be quick and divisible by what a JSON schema cannot say
# about widths: an even rope dimension, the 2-D and 3-D sinusoids' multiples of 4 and 6.
SMALL = 12
# Items of arrays are smaller: grid sides multiply (a 3-D grid of 4 is 64 cells, and its
# similarity 64² values, well inside the text limit).
SMALL_ITEM = 4
# How each format's answer is read (API.md §3); openapi-fetch calls this `parseAs`.
PARSE_AS = {"json": "json", "plotly": "json", "csv": "text"}
ARRAY_FORMATS = ("json", "npy", "bin")
NPY = "application/x-npy"


@dataclass(frozen=True)
class Call:
    """One request, as both clients make it: which operation, with which parameters."""

    method: str
    path: str
    operation_id: str
    query: Mapping[str, Json] = field(default_factory=dict)
    path_params: Mapping[str, Json] = field(default_factory=dict)
    body: Json = None
    parse_as: str = "json"
    # The bytes of a file body (application/octet-stream), for an operation that takes one.
    file: bytes | None = None
    # The parts of a multipart/form-data body, for an operation that takes nothing else: each
    # file part's bytes, each JSON part's value, by name.
    form: Mapping[str, bytes | Json] | None = None

    @property
    def label(self) -> str:
        shown = {**self.path_params, **self.query}
        return f"{self.method.upper()} {self.path} {shown}"


@dataclass(frozen=True)
class Check:
    """What must hold: `single` answers 200 (and `conforms`, for a verify of the service's
    own table in `body_from`); `arrays` holds the json, npy and bin answers of one array."""

    kind: str  # "single" | "arrays"
    calls: tuple[Call, ...]
    body_from: Call | None = None
    conforms: bool = False


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    operation_id: str
    parameters: tuple[Mapping[str, Json], ...]
    body_content: Mapping[str, Json]
    answer_content: Mapping[str, Json]

    def parameter(self, name: str) -> Mapping[str, Json] | None:
        return next((p for p in self.parameters if p["name"] == name), None)

    def query_names(self) -> set[str]:
        return {p["name"] for p in self.parameters if p["in"] == "query"}


def resolve(document: Mapping[str, Json], node: Json) -> Json:
    """`node` with `$ref`s followed (one level at a time, as the walk needs them)."""
    while isinstance(node, Mapping) and "$ref" in node:
        target: Json = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def operations(document: Mapping[str, Json]) -> list[Operation]:
    found = []
    for path, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            parameters = tuple(resolve(document, p) for p in [*shared, *op.get("parameters", [])])
            body = resolve(document, op.get("requestBody", {}))
            answer = resolve(document, op.get("responses", {}).get("200", {}))
            found.append(
                Operation(
                    method,
                    path,
                    op.get("operationId", f"{method} {path}"),
                    parameters,
                    body.get("content", {}),
                    answer.get("content", {}),
                )
            )
    return found


def _branch(document: Mapping[str, Json], schema: Json) -> Json:
    """The non-null branch of an optional schema (`anyOf: [T, null]`), or an object's first
    choice of required members."""
    schema = resolve(document, schema)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [resolve(document, s) for s in schema[key]]
            usable = [s for s in branches if s.get("type") != "null"]
            rest = {k: v for k, v in schema.items() if k != key}
            # A branch that only requires members (positions, or position_ids with mrope)
            # adds to the object's own required ones.
            required = [*rest.get("required", []), *usable[0].get("required", [])]
            return {**usable[0], **rest} | ({"required": required} if required else {})
    if "allOf" in schema and len(schema["allOf"]) == 1:
        inner = resolve(document, schema["allOf"][0])
        return {**inner, **{k: v for k, v in schema.items() if k != "allOf"}}
    return schema


def _small_number(schema: Mapping[str, Json], integer: bool, small: int) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value: float = small
    if low is not None and value <= low:
        value = low + 1 if "exclusiveMinimum" in schema else low
    if high is not None and value >= high:
        value = high - 1 if "exclusiveMaximum" in schema else high
    step = schema.get("multipleOf")
    if step:
        value = math.ceil(value / step) * step
    return int(value) if integer else float(value)


def example(schema: Json, document: Mapping[str, Json], small: int = SMALL) -> Json:
    """A valid value of `schema`: its example, else its default, else its first choice, else a
    small value in its range (arrays as short as allowed, objects with their required fields)."""
    schema = _branch(document, schema)
    if schema.get("examples"):
        return schema["examples"][0]
    for key in ("example", "default", "const"):
        if schema.get(key) is not None:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return _small_number(schema, kind == "integer", small)
    if kind == "boolean":
        return False
    if kind == "array":
        item = example(schema.get("items", {}), document, SMALL_ITEM)
        return [item] * max(schema.get("minItems", 1), 1)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {
            name: example(properties[name], document) for name in schema.get("required", [])
        } | {
            name: sub["default"]
            for name, sub in properties.items()
            if isinstance(sub, Mapping) and sub.get("default") is not None
        }
    return "x"


def parameter_example(parameter: Mapping[str, Json], document: Mapping[str, Json]) -> Json:
    if parameter.get("example") is not None:
        return parameter["example"]
    examples = parameter.get("examples") or {}
    for item in examples.values():
        if "value" in item:
            return item["value"]
    return example(parameter.get("schema", {}), document)


def _sends(parameter: Mapping[str, Json], document: Mapping[str, Json]) -> bool:
    """Required parameters, and optional ones with a default (sent as that default, so the
    types of as many parameters as possible are exercised without choosing for the server)."""
    schema = resolve(document, parameter.get("schema", {}))
    return bool(parameter.get("required")) or schema.get("default") is not None


def base_call(op: Operation, document: Mapping[str, Json]) -> Call:
    query: dict[str, Json] = {}
    path_params: dict[str, Json] = {}
    for parameter in op.parameters:
        if parameter["in"] not in ("query", "path") or not _sends(parameter, document):
            continue
        target = query if parameter["in"] == "query" else path_params
        target[parameter["name"]] = parameter_example(parameter, document)
    body = None
    if "application/json" in op.body_content and NPY not in op.body_content:
        body = example(op.body_content["application/json"].get("schema", {}), document)
    file = None
    if "application/octet-stream" in op.body_content and not (
        {"application/json", NPY} & set(op.body_content)
    ):
        file = example_file(op.path)
    form = example_form(op.path) if set(op.body_content) == {"multipart/form-data"} else None
    return Call(
        op.method, op.path, op.operation_id, query, path_params, body, _parse_as(op), file, form
    )


def example_file(path: str) -> bytes:
    """The file an operation that takes one is sent: the one body whose example a document
    cannot hold (its schema says bytes; its description says which format)."""
    from tests.gguf.files import TINY_LLAMA, gguf

    files = {
        "/v1/rope/gguf": lambda: gguf(TINY_LLAMA),
    }
    if path not in files:
        raise KeyError(f"{path} takes a file: tests/clients/plan.py needs an example of it")
    return files[path]()


def example_form(path: str) -> dict[str, bytes | Json]:
    """The parts an operation that takes only multipart/form-data is sent: files a document
    cannot hold, and the JSON beside them."""
    forms = {"/v1/rope/applied": _kernel_dump, "/v1/rope/onnx": _onnx_model}
    if path not in forms:
        raise KeyError(f"{path} takes a form: tests/clients/plan.py needs an example of it")
    return forms[path]()


def _kernel_dump() -> dict[str, bytes | Json]:
    """q before and after the exact rope of a config's heads (8 wide), at positions 0 … 5."""
    import io

    import numpy as np

    from posenc.schemes.rope import maths
    from posenc.schemes.rope.params import RopeParams

    config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4}
    before = np.random.default_rng(0).standard_normal((6, 8))
    after = maths.rotate(RopeParams(d_model=8), before, np.arange(6))
    npy = {}
    for name, values in (("before", before), ("after", after)):
        written = io.BytesIO()
        np.save(written, values.astype(np.float32))
        npy[name] = written.getvalue()
    return {**npy, "config": config}


def _onnx_model() -> dict[str, bytes | Json]:
    """A graph of two attention layers reading one pair of caches it holds itself."""
    from tests.onnx import graphs

    return {"model": graphs.serialised(graphs.plain())}


def _parse_as(op: Operation) -> str:
    first = next(iter(op.answer_content), "application/json")
    if first.endswith("json"):
        return "json"
    return "text" if first.startswith("text/") else "arrayBuffer"


def _choices(op: Operation, name: str, document: Mapping[str, Json]) -> list[Json]:
    parameter = op.parameter(name)
    if parameter is None:
        return []
    return list(_branch(document, parameter.get("schema", {})).get("enum", []))


def _table_of(op: Operation, ops: list[Operation]) -> Operation | None:
    """The GET `…/table` beside a `…/verify`: what the service itself serves."""
    if not op.path.endswith("/verify"):
        return None
    path = op.path.removesuffix("/verify") + "/table"
    return next((o for o in ops if o.path == path and o.method == "get"), None)


def checks(document: Mapping[str, Json]) -> Iterator[Check]:
    """Every operation of the document, each format it offers and each dtype of its arrays."""
    ops = operations(document)
    for op in ops:
        call = base_call(op, document)
        formats = _choices(op, "format", document)
        table = _table_of(op, ops) if NPY in op.body_content else None
        if table is not None:
            source = base_call(table, document)
            shared = {k: v for k, v in call.query.items() if k in table.query_names()}
            source = replace(
                source,
                query={**source.query, **shared, "format": "npy"},
                path_params={**source.path_params, **call.path_params},
                parse_as="arrayBuffer",
            )
            for fmt in formats or [None]:
                verify = in_format(call, call.query, fmt) if fmt else call
                yield Check("single", (verify,), source, conforms=fmt in (None, "json"))
            continue
        if all(f in formats for f in ARRAY_FORMATS):
            for dtype in _choices(op, "dtype", document) or [None]:
                typed = {**call.query, "dtype": dtype} if dtype else call.query
                yield Check("arrays", tuple(in_format(call, typed, f) for f in ARRAY_FORMATS))
            formats = [f for f in formats if f not in ARRAY_FORMATS]
        elif not formats:
            yield Check("single", (call,))
        for fmt in formats:
            yield Check("single", (in_format(call, call.query, fmt),))


def in_format(call: Call, query: Mapping[str, Json], fmt: str) -> Call:
    return replace(call, query={**query, "format": fmt}, parse_as=PARSE_AS.get(fmt, "arrayBuffer"))


def untyped(document: Mapping[str, Json]) -> list[str]:
    """Where a generated client gets an untyped bag: a JSON answer or body whose schema has no
    properties (a client then reads `dict[str, Any]` / `Record<string, never>`)."""
    found = []
    for op in operations(document):
        where = f"{op.method.upper()} {op.path}"
        for media, content in op.answer_content.items():
            if media.endswith("json") and not _has_shape(document, content.get("schema")):
                found.append(f"{where}: 200 {media} has no schema with properties")
        for media, content in op.body_content.items():
            if media.endswith("json") and not _has_shape(document, content.get("schema")):
                found.append(f"{where}: request body {media} has no schema with properties")
    return found


def _has_shape(document: Mapping[str, Json], schema: Json) -> bool:
    if schema is None:
        return False
    schema = _branch(document, schema)
    return bool(schema.get("properties")) or any(
        _has_shape(document, s) for s in schema.get("anyOf", []) + schema.get("oneOf", [])
    )
