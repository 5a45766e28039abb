"""Clients generated from the live /openapi.json call every operation it lists, and get the
service's own arrays: TypeScript (openapi-typescript + openapi-fetch, `tsc --strict`, node) and
Python (openapi-python-client). The calls are planned from the document alone (tests/clients/
plan.py), so they cover whatever operations and parameters the document declares."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import attrs
import httpx
import numpy as np
import pytest
from openapi_python_client.strings import PythonIdentifier

from tests.clients import plan, typescript
from tests.live.conftest import LiveServer, live

pytestmark = [pytest.mark.live, pytest.mark.system]
__all__ = ["live"]  # the live-server fixture, shared with tests/live
HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples/js"
TSC = HERE / "node_modules/typescript/bin/tsc"
TSCONFIG = {
    "compilerOptions": {
        "strict": True,
        "target": "ES2022",
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "lib": ["ES2022", "DOM"],
        "types": [],
        # tsc checks, and writes the JavaScript that node runs only when nothing failed.
        "noEmitOnError": True,
        "outDir": "out",
    },
    "files": ["client.test.ts"],
}


def _run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def document(live: LiveServer) -> dict[str, Any]:
    answer = httpx.get(f"{live.url}/openapi.json", timeout=10)
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result


@pytest.fixture(scope="module")
def project(live: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TypeScript project holding the `paths` types generated from the live document."""
    node = shutil.which("node")
    assert node is not None, "node is on every machine of this project"
    assert (HERE / "node_modules/openapi-fetch").exists(), "make test runs npm ci in tests/clients"
    root = tmp_path_factory.mktemp("typescript")
    (root / "node_modules").symlink_to(HERE / "node_modules")
    (root / "package.json").write_text('{"type": "module"}\n')
    shutil.copy(HERE / "support.ts", root / "support.ts")
    generated = _run(
        [node, str(HERE / "generate_types.mjs"), f"{live.url}/openapi.json", "schema.ts"], root
    )
    assert generated.returncode == 0, generated.stderr[-3000:]
    return root


def test_the_typescript_client_calls_every_operation(
    live: LiveServer, document: dict[str, Any], project: Path
) -> None:
    checks = list(plan.checks(document))
    (project / "client.test.ts").write_text(typescript.client_test(checks))
    (project / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    compiled = _run(["node", str(TSC), "-p", "tsconfig.json"], project)
    assert compiled.returncode == 0, "tsc --strict:\n" + compiled.stdout[-6000:]
    ran = _run(["node", "out/client.test.js"], project, POSENC_URL=live.url)
    assert ran.stdout.strip(), ran.stderr[-3000:]
    outcome = json.loads(ran.stdout.strip().splitlines()[-1])
    assert outcome["failures"] == [], "\n".join(outcome["failures"])
    assert ran.returncode == 0 and outcome["passed"] == len(checks)


def test_the_typescript_query_types_refuse_a_parameter_the_operation_does_not_take(
    document: dict[str, Any], project: Path
) -> None:
    # openapi-fetch's call signatures accept extra query names; the generated types do not.
    source, expected = typescript.negative_test(document)
    assert expected, "the document lists operations with query parameters"
    (project / "negative.ts").write_text(source)
    config = {**TSCONFIG, "files": ["negative.ts"]}
    config["compilerOptions"] = {**TSCONFIG["compilerOptions"], "noEmit": True}  # type: ignore[dict-item]
    (project / "tsconfig.negative.json").write_text(json.dumps(config))
    compiled = _run(["node", str(TSC), "-p", "tsconfig.negative.json"], project)
    errors = typescript.tsc_errors(compiled.stdout)
    assert sorted(errors) == [n.line for n in expected], compiled.stdout[-6000:]
    for negative in expected:
        code, message = errors[negative.line]
        assert code == "TS2353" and f'"{negative.name}"' in message, (negative, message)


def test_the_typescript_body_types_refuse_a_misspelt_member_of_every_body(
    document: dict[str, Any], project: Path
) -> None:
    # A body typed `unknown` (an anyOf of bare required lists) took any member; a closed
    # type refuses one misspelt, while the planned valid body still compiles.
    source, expected, open_bodies = typescript.negative_body_test(document)
    assert open_bodies == [], "bodies no misspelling can be put in"
    bodies = {op.path for op in plan.operations(document) if "application/json" in op.body_content}
    assert {n.where.split()[1] for n in expected} == bodies
    (project / "bodies.ts").write_text(source)
    config = {**TSCONFIG, "files": ["bodies.ts"]}
    config["compilerOptions"] = {**TSCONFIG["compilerOptions"], "noEmit": True}  # type: ignore[dict-item]
    (project / "tsconfig.bodies.json").write_text(json.dumps(config))
    compiled = _run(["node", str(TSC), "-p", "tsconfig.bodies.json"], project)
    errors = typescript.tsc_errors(compiled.stdout, "bodies.ts")
    assert sorted(errors) == [n.line for n in expected], compiled.stdout[-6000:]
    for negative in expected:
        code, message = errors[negative.line]
        assert code == "TS2353" and typescript.UNKNOWN_MEMBER in message, (negative, message)


def test_the_javascript_example_is_typed_by_the_live_document(live: LiveServer) -> None:
    # Its posenc.d.ts is what openapi-typescript writes today (`npm run types` rewrites it),
    # and tsc --strict checks client.mjs against it.
    assert (EXAMPLE / "node_modules/openapi-fetch").exists(), "make test runs npm ci in examples/js"
    cli = EXAMPLE / "node_modules/openapi-typescript/bin/cli.js"
    written = _run(["node", str(cli), f"{live.url}/openapi.json"], EXAMPLE)
    assert written.returncode == 0, written.stderr[-3000:]
    committed = (EXAMPLE / "posenc.d.ts").read_text()
    assert written.stdout == committed, "examples/js/posenc.d.ts is stale: npm run types"
    checked = _run(["node", str(EXAMPLE / "node_modules/typescript/bin/tsc"), "-p", "."], EXAMPLE)
    assert checked.returncode == 0, checked.stdout[-4000:]


# -- Python -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_client(live: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    """The package openapi-python-client writes for the live document, imported."""
    root = tmp_path_factory.mktemp("python")
    (root / "openapi.json").write_bytes(httpx.get(f"{live.url}/openapi.json").content)
    command = [
        str(Path(sys.executable).with_name("openapi-python-client")),
        "generate",
        "--path",
        "openapi.json",
        "--meta",
        "none",
        "--output-path",
        "posenc_generated",
    ]
    generated = _run(command, root)
    assert generated.returncode == 0, generated.stdout[-3000:] + generated.stderr[-3000:]
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("posenc_generated")
    finally:
        sys.path.remove(str(root))


def _endpoints(package: types.ModuleType) -> dict[str, types.ModuleType]:
    """Every generated endpoint module, by its name (the operationId, as the generator names it)."""
    api = importlib.import_module(f"{package.__name__}.api")
    found = {}
    for info in pkgutil.walk_packages(api.__path__, f"{api.__name__}."):
        module = importlib.import_module(info.name)
        if hasattr(module, "sync_detailed"):
            found[info.name.rsplit(".", 1)[1]] = module
    return found


def _alternatives(hint: Any) -> Iterator[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            yield from _alternatives(arg)
    else:
        yield hint


def _convert(hint: Any, value: Any) -> Any:
    """A planned JSON value as the generated signature types it: enums as their classes,
    objects as their attrs models, lists item by item."""
    models = [kind for kind in _alternatives(hint) if hasattr(kind, "from_dict")]
    if isinstance(value, dict) and models:
        return _from_dict(models, value)  # a body of several shapes: the one that reads it
    for kind in _alternatives(hint):
        if isinstance(kind, type) and issubclass(kind, Enum) and isinstance(value, str):
            return kind(value)
        if isinstance(value, list) and typing.get_origin(kind) is list:
            (item,) = typing.get_args(kind)
            return [_convert(item, v) for v in value]
    return value


class PythonRun:
    def __init__(self, package: types.ModuleType, url: str) -> None:
        self.endpoints = _endpoints(package)
        self.client = package.Client(base_url=url, timeout=httpx.Timeout(60))
        generated_types = importlib.import_module(f"{package.__name__}.types")
        self.file = generated_types.File
        # What the generated modules import for type checkers alone: the names their hints use.
        self.names = {
            **vars(typing),
            **vars(generated_types),
            **vars(importlib.import_module(f"{package.__name__}.models")),
        }
        self.failures: list[str] = []
        self.passed = 0
        self.opened = [self.client]

    def close(self) -> None:
        for client in self.opened:
            client.__exit__(None, None, None)

    def call(self, call: plan.Call, **extra: Any) -> Any:
        module = self.endpoints[PythonIdentifier(call.operation_id, prefix="")]
        function = module.sync_detailed
        signature = inspect.signature(function)
        arguments = dict(extra)
        for name, value in {**call.path_params, **call.query}.items():
            python_name = PythonIdentifier(name, prefix="field_")
            arguments[python_name] = _convert(signature.parameters[python_name].annotation, value)
        if call.body is not None:
            arguments["body"] = _convert(signature.parameters["body"].annotation, call.body)
        if call.file is not None:
            arguments["body"] = self.file(payload=io.BytesIO(call.file))
        if call.form is not None:
            arguments["body"] = self.form(signature.parameters["body"].annotation, call.form)
        client = arguments.pop("client", self.client)
        return function(client=client, **arguments)

    def form(self, kind: Any, parts: Mapping[str, Any]) -> Any:
        """The generated model of a multipart body: a File for each part of bytes, the
        generated model of each JSON part."""
        hints = typing.get_type_hints(kind.__init__, self.names)
        given = {}
        for name, value in parts.items():
            if isinstance(value, bytes):
                given[name] = self.file(payload=io.BytesIO(value), file_name=name)
            else:
                hint = hints[name]
                model = next(a for a in typing.get_args(hint) or (hint,) if hasattr(a, "from_dict"))
                given[name] = model.from_dict(value)
        return kind(**given)

    def answer(self, call: plan.Call, **extra: Any) -> Any | None:
        try:
            answer = self.call(call, **extra)
        except Exception as error:  # the generated code's own failure is the finding
            self.failures.append(f"{call.label}: {type(error).__name__}: {str(error)[:300]}")
            return None
        if answer.status_code != 200:
            self.failures.append(f"{call.label}: {answer.status_code} {answer.content[:300]!r}")
            return None
        return answer

    def single(self, check: plan.Check) -> None:
        extra = {}
        if check.body_from is not None:
            # The generated code sends a File as application/octet-stream, which carries its
            # dtype and shape in headers (API.md §2); the raw values are the table's `bin`.
            raw = plan.in_format(check.body_from, check.body_from.query, "bin")
            source = self.answer(raw)
            if source is None:
                return
            headers = {k: source.headers[k] for k in ("X-Array-Shape", "X-Array-Dtype")}
            client = self.client.with_headers(headers)
            self.opened.append(client)
            extra = {"body": self.file(payload=io.BytesIO(source.content)), "client": client}
        answer = self.answer(check.calls[0], **extra)
        if answer is None:
            return
        if check.conforms and json.loads(answer.content).get("conforms") is not True:
            self.failures.append(f"{check.calls[0].label}: does not conform")
            return
        self.passed += 1

    def arrays(self, check: plan.Check) -> None:
        envelope, npy, raw = (self.answer(call) for call in check.calls)
        if envelope is None or npy is None or raw is None:
            return
        served = np.load(io.BytesIO(npy.content), allow_pickle=False)
        shape = tuple(int(n) for n in raw.headers["X-Array-Shape"].split(",") if n)
        binary = np.frombuffer(raw.content, dtype=raw.headers["X-Array-Dtype"]).reshape(shape)
        parsed = json.loads(envelope.content)
        from_json = np.asarray(parsed["data"], dtype=parsed["dtype"])
        label = check.calls[0].label
        if served.size == 0:
            self.failures.append(f"{label}: an empty array proves nothing")
        elif binary.dtype != served.dtype or binary.tobytes() != served.tobytes():
            self.failures.append(f"{label}: bin {binary.dtype} {shape} is not the npy answer")
        elif from_json.shape != served.shape or from_json.tobytes() != served.tobytes():
            self.failures.append(f"{label}: json data does not parse to the npy answer")
        else:
            self.passed += 1


def test_the_python_client_calls_every_operation(
    live: LiveServer, document: Mapping[str, Any], python_client: types.ModuleType
) -> None:
    run = PythonRun(python_client, live.url)
    checks = list(plan.checks(document))
    missing = {PythonIdentifier(c.calls[0].operation_id, prefix="") for c in checks}
    assert not missing - set(run.endpoints), f"not generated: {missing - set(run.endpoints)}"
    try:
        for check in checks:
            (run.arrays if check.kind == "arrays" else run.single)(check)
    finally:
        run.close()
    assert run.failures == [], "\n".join(run.failures)
    assert run.passed == len(checks)


def test_every_json_answer_and_body_has_a_typed_schema(document: Mapping[str, Any]) -> None:
    # A schema without properties gives generated clients an untyped bag.
    assert plan.untyped(document) == []


def test_a_misspelt_member_of_every_body_fails_to_construct_in_the_python_client(
    document: Mapping[str, Any], python_client: types.ModuleType
) -> None:
    endpoints = _endpoints(python_client)
    for op in plan.operations(document):
        content = op.body_content.get("application/json")
        if content is None:
            continue
        function = endpoints[PythonIdentifier(op.operation_id, prefix="")].sync_detailed
        hint = inspect.signature(function).parameters["body"].annotation
        models = [kind for kind in _alternatives(hint) if hasattr(kind, "from_dict")]
        assert models, f"{op.path}: the body has no generated model"
        valid = plan.example(content.get("schema", {}), document)
        built = _from_dict(models, valid)
        members = {a.name: getattr(built, a.name) for a in attrs.fields(type(built)) if a.init}
        type(built)(**members)  # the valid body's members construct it
        with pytest.raises(TypeError, match=typescript.UNKNOWN_MEMBER):
            type(built)(**members, **{typescript.UNKNOWN_MEMBER: 1})


def _from_dict(models: list[Any], value: Any) -> Any:
    """``value`` as the first of a body's generated models that reads it."""
    for kind in models:
        try:
            return kind.from_dict(value)
        except (KeyError, TypeError, ValueError):
            continue
    raise AssertionError(f"no generated model reads {value}")
