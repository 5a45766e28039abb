"""A body of an operation that takes files (``Extra.binary``) as an :class:`Upload`: the file
itself, or the parts of a ``multipart/form-data`` body — a file beside JSON parts, or parts of
bytes each with its headers (:mod:`.multipart`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from app.bodies import multipart
from posenc.declare import Extra, Upload
from posenc.errors import ParameterError


def upload(extra: Extra, received: bytearray, content_type: str, query: dict[str, Any]) -> Upload:
    """The file and the JSON parts beside it (multipart), or the body as the file; or, for an
    extra that takes parts of bytes, those parts with their headers and the JSON ones."""
    is_form = content_type.lower().startswith("multipart/")
    if extra.files:
        if not is_form:
            raise ParameterError("content-type", "must be multipart/form-data")
        return _file_parts(extra, received, content_type, query)
    if not is_form:
        return Upload(received, query)
    parts = multipart.split(received, content_type, (extra.name, *extra.parts))
    if extra.name not in parts:
        raise ParameterError(extra.name, "is the part that holds the file, and is missing")
    return Upload(parts[extra.name], query, _json_parts(extra, parts))


def _file_parts(
    extra: Extra, received: bytearray, content_type: str, query: dict[str, Any]
) -> Upload:
    single = tuple(file.name for file in extra.files if not file.repeats)
    repeated = tuple(file.name for file in extra.files if file.repeats)
    parts = multipart.parts(received, content_type, (*single, *extra.parts), repeated)
    for file in extra.files:
        if file.required and file.name not in parts:
            raise ParameterError(file.name, "is a required part, and is missing")
    files = {file.name: parts[file.name] for file in extra.files if file.name in parts}
    json = {name: parts[name][0].data for name in extra.parts if name in parts}
    return Upload(memoryview(b""), query, _json_parts(extra, json), files)


def _json_parts(extra: Extra, parts: Mapping[str, Any]) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for name in extra.parts:
        if name in parts:
            if len(parts[name]) > extra.max_body_bytes:
                raise ParameterError(name, f"may hold at most {extra.max_body_bytes} bytes")
            try:
                given[name] = orjson.loads(parts[name])
            except orjson.JSONDecodeError as error:
                raise ParameterError(name, f"must be a JSON document: {error}") from None
    return given
