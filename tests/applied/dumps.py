"""A kernel's dump as the tests send it: the two arrays (and the positions) as ``.npy`` parts
or raw parts with their own headers, to the core (:func:`analyse`, whose every answer is held to
the OpenAPI document) or over HTTP (:func:`files`)."""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.declare import Part
from posenc.schemes.rope.applied.answer import answer


@dataclass(frozen=True)
class Dump:
    """What went into a kernel and what came out, in the runtime's own layout: the tokens
    along ``token_axis``; bfloat16 arrays as their uint16 words (``dtype`` says so)."""

    before: npt.NDArray[Any]
    after: npt.NDArray[Any]
    token_axis: int = 0
    positions: npt.NDArray[np.int64] | None = None
    dtype: str | None = None  # "bfloat16" where the arrays hold bfloat16's words
    query: Mapping[str, Any] = field(default_factory=dict)

    def with_after(self, after: npt.NDArray[Any]) -> Dump:
        return Dump(self.before, after, self.token_axis, self.positions, self.dtype, self.query)


def npy(array: npt.NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def part(array: npt.NDArray[Any], dtype: str | None = None) -> Part:
    """A ``.npy`` part; bfloat16 words as raw bytes with the part headers that say so."""
    if dtype == "bfloat16":
        headers = {
            "x-array-shape": ",".join(map(str, array.shape)),
            "x-array-dtype": "bfloat16",
        }
        return Part(np.ascontiguousarray(array, "<u2").tobytes(), headers)
    return Part(npy(array))


def query_of(dump: Dump, **more: Any) -> dict[str, Any]:
    return {"token_axis": dump.token_axis, **dump.query, **more}


def analyse(dump: Dump, config: Any = None, **query: Any) -> dict[str, Any]:
    """The answer of ``POST /v1/rope/applied`` for ``dump``, computed in this process."""
    positions = None if dump.positions is None else part(dump.positions)
    given = answer(
        part(dump.before, dump.dtype),
        part(dump.after, dump.dtype),
        positions,
        config,
        query_of(dump, **query),
    )
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(given)]
    assert not errors, errors
    return given


@functools.cache
def validator() -> Any:
    """The answer's schema as the service's OpenAPI document publishes it."""
    import jsonschema

    from app.main import create_app

    operation = create_app().openapi()["paths"]["/v1/rope/applied"]["post"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator(schema)


def files(dump: Dump) -> dict[str, Any]:
    """The dump's parts as httpx sends multipart/form-data (raw parts with their headers)."""
    sent: dict[str, Any] = {}
    arrays = [("before", dump.before), ("after", dump.after)]
    if dump.positions is not None:
        arrays.append(("positions", dump.positions))
    for name, array in arrays:
        made = part(array, dump.dtype if name != "positions" else None)
        sent[name] = (f"{name}.bin", bytes(made.data), "application/octet-stream", made.headers)
    return sent


def names(answer: Mapping[str, Any]) -> list[str]:
    """The findings' names, in order."""
    return [finding["name"] for finding in answer["diagnosis"]]
