"""What the ONNX tests share: a model folder sent to the service the way a client sends it (the
graph, then the external ranges a 422 asks for) and its answer held to the OpenAPI document, the
caches read with the ``onnx`` package itself (independently of the service's reader), and files
rewritten with it."""

from __future__ import annotations

import json
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import numpy.typing as npt
import onnx
from onnx import numpy_helper

from tests.conftest import Client

EXTERNAL_DATA_NEEDED = "urn:posenc:problem:external-data-needed"


def multipart(parts: list[tuple[str, str | None, bytes]]) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body of (name, filename, bytes) parts, and its content type."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        body += data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, {"content-type": f"multipart/form-data; boundary={boundary}"}


def ranges(folder: Path, needed: list[dict[str, Any]]) -> list[tuple[str, str | None, bytes]]:
    """The parts that send what a 422 asked for, read from the files beside the model."""
    parts: list[tuple[str, str | None, bytes]] = []
    for need in needed:
        with open(folder / need["location"], "rb") as file:
            file.seek(need["offset"])
            data = file.read(need["length"])
        parts.append(("external", f"{need['location']}@{need['offset']}", data))
    return parts


def check(
    client: Client,
    folder: Path,
    config: dict[str, Any] | None = None,
    model: str = "model.onnx",
) -> tuple[dict[str, Any], int]:
    """POST /v1/rope/onnx for the model in ``folder`` (with its genai_config.json and
    ``config``), sending the external ranges it asks for: the answer and the bytes of
    external data sent."""
    base: list[tuple[str, str | None, bytes]] = [("model", model, (folder / model).read_bytes())]
    if (folder / "genai_config.json").exists():
        base.append(("genai_config", None, (folder / "genai_config.json").read_bytes()))
    if config is not None:
        base.append(("config", None, json.dumps(config).encode()))
    extra: list[tuple[str, str | None, bytes]] = []
    for _ in range(2):
        body, headers = multipart(base + extra)
        response = client.post("/v1/rope/onnx", content=body, headers=headers)
        if response.status_code == 200:
            answer: dict[str, Any] = response.json()
            assert not invalid(client, answer), invalid(client, answer)
            return answer, sum(len(data) for _, _, data in extra)
        problem = response.json()
        assert response.status_code == 422 and problem["type"] == EXTERNAL_DATA_NEEDED, problem
        extra = ranges(folder, problem["needed"])
    raise AssertionError("the service asked for external data twice")


# Each app's answer schema, read once from its document.
_SCHEMAS: weakref.WeakKeyDictionary[Any, jsonschema.Draft202012Validator] = (
    weakref.WeakKeyDictionary()
)


def invalid(client: Client, answer: Any) -> list[str]:
    """Where ``answer`` is not what the OpenAPI document of ``client``'s app says it is."""
    if client.app not in _SCHEMAS:
        paths = client.get("/openapi.json").json()["paths"]
        content = paths["/v1/rope/onnx"]["post"]["responses"]["200"]["content"]
        schema = content["application/json"]["schema"]
        _SCHEMAS[client.app] = jsonschema.Draft202012Validator(schema)
    errors = _SCHEMAS[client.app].iter_errors(answer)
    return [f"{list(error.absolute_path)}: {error.message}" for error in errors]


def caches(folder: Path, model: str = "model.onnx") -> dict[str, npt.NDArray[np.float64]]:
    """Every tensor named like a rope cache, as float64: initializers and the Constant nodes of
    If branches, read by the onnx package."""
    loaded = onnx.load(str(folder / model), load_external_data=False)
    found: dict[str, npt.NDArray[np.float64]] = {}
    for tensor in loaded.graph.initializer:
        if "_cache" in tensor.name:
            found[tensor.name] = numpy_helper.to_array(tensor, str(folder)).astype(np.float64)

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            if node.op_type == "Constant" and "_cache" in node.output[0]:
                found[node.output[0]] = numpy_helper.to_array(node.attribute[0].t).astype(
                    np.float64
                )
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g)

    walk(loaded.graph)
    return found


def rewrite(source: Path, target: Path, change: Callable[[onnx.ModelProto], None]) -> Path:
    """The model in ``source`` changed by ``change`` and saved in ``target`` with its tensors
    in one external data file, as the builder saves them, genai_config.json beside it."""
    target.mkdir(parents=True, exist_ok=True)
    loaded = onnx.load(str(source / "model.onnx"))
    change(loaded)
    onnx.save_model(
        loaded,
        str(target / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="model.onnx.data",
        size_threshold=1024,
    )
    if (source / "genai_config.json").exists():
        (target / "genai_config.json").write_bytes((source / "genai_config.json").read_bytes())
    return target


def replace_caches(
    model: onnx.ModelProto,
    make: Callable[[str, npt.NDArray[np.float32]], npt.NDArray[np.float32]],
) -> None:
    """Each rope cache initializer replaced by ``make(name, values)`` (same dtype)."""
    for k, tensor in enumerate(model.graph.initializer):
        if tensor.name in ("cos_cache", "sin_cache"):
            values = numpy_helper.to_array(tensor)
            made = make(tensor.name, values).astype(values.dtype)
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(made, tensor.name))


def rope_caches(
    length: int, pairs: int, base: float, factor: float = 1.0
) -> dict[str, npt.NDArray[np.float32]]:
    """A cos and sin cache of a plain rope, in float64 rounded to float32."""
    omega = base ** (-np.arange(pairs) / pairs)
    angles = np.arange(length)[:, None] * omega[None, :]
    return {
        "cos_cache": (np.cos(angles) * factor).astype(np.float32),
        "sin_cache": (np.sin(angles) * factor).astype(np.float32),
    }


def nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if node.op_type == op_type]


def set_attribute(node: onnx.NodeProto, name: str, value: int) -> None:
    for attribute in node.attribute:
        if attribute.name == name:
            attribute.i = value
            return
    node.attribute.append(onnx.helper.make_attribute(name, value))
