"""What the OpenAPI document says of each operation: every answer as it is sent.

Array operations answer JSON (the envelope, or a Plotly figure for ``format=plotly``), ``.npy``,
raw little-endian bytes with ``X-Array-Shape``/``X-Array-Dtype``, CSV or PNG; every error is an
RFC 9457 problem. Generated clients read these schemas, so they are exact, not ``object``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.models import SHAPE_PATTERN, Format, model
from posenc.declare import Extra, Scheme

PROBLEM: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {
                    "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "msg": {"type": "string"},
                },
            },
        },
    },
}
# The problem of an operation whose body is a file's first bytes: one that stops too soon says
# how many bytes to send.
PREFIX_PROBLEM: dict[str, Any] = {
    **PROBLEM,
    "properties": {
        **PROBLEM["properties"],
        "needed_bytes": {
            "type": "integer",
            "minimum": 1,
            "description": "where the body stops before what is read from it: the bytes from "
            "the file's start to send at least",
        },
    },
}
# The problem of an operation whose file refers to bytes elsewhere (Extra.incomplete): which to
# send.
EXTERNAL_PROBLEM: dict[str, Any] = {
    **PREFIX_PROBLEM,
    "properties": {
        **PREFIX_PROBLEM["properties"],
        "needed": {
            "type": "array",
            "description": "with type urn:posenc:problem:external-data-needed: the byte ranges of "
            "the files the body's file refers to that the next request must send, each as a "
            "part whose filename is <location>@<offset>",
            "items": {
                "type": "object",
                "required": ["tensor", "location", "offset", "length"],
                "additionalProperties": False,
                "properties": {
                    "tensor": {"type": "string"},
                    "location": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "length": {"type": "integer", "minimum": 1},
                },
            },
        },
    },
}
_RETRY_AFTER = {"Retry-After": {"schema": {"type": "string"}, "description": "seconds"}}


def _problem(description: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": PROBLEM}},
        **extra,
    }


# Every operation may answer these.
PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "the body is not parseable (a problem), or the HTTP request itself is "
        "malformed, which the server answers in plain text before the service sees it",
        "content": {
            "application/problem+json": {"schema": PROBLEM},
            "text/plain": {"schema": {"type": "string"}},
        },
    },
    413: _problem("the body is over POSENC_MAX_BODY_BYTES (answered before it is read)"),
    415: _problem(
        "the body is sent in a content coding (Content-Encoding: gzip …), named in detail: "
        "bodies are read as sent (identity); answered before it is read",
        headers={"Accept-Encoding": {"schema": {"type": "string"}, "description": "identity"}},
    ),
    422: _problem(
        "a parameter is invalid or breaks a rule its description states, or the answer would be "
        "over a limit (type urn:posenc:problem:limit-exceeded, naming the figure and the limit)"
    ),
    503: _problem(
        "busy: no memory became free in time (urn:posenc:problem:overloaded), or the work ran "
        "past POSENC_REQUEST_TIMEOUT_S (urn:posenc:problem:timeout); retry after Retry-After",
        headers=_RETRY_AFTER,
    ),
}

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_NUMBERS: dict[str, Any] = {"type": "array", "items": {"type": "number"}}
_NESTED = {
    "anyOf": [
        _NUMBERS,
        {"type": "array", "items": _NUMBERS},
        {"type": "array", "items": {"type": "array", "items": _NUMBERS}},
    ]
}
ENVELOPE: dict[str, Any] = {
    "type": "object",
    "required": ["scheme", "params", "shape", "dtype", "data"],
    "properties": {
        "scheme": {"type": "string"},
        "params": {"type": "object", "description": "the canonical parameters of the answer"},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "dtype": {"type": "string", "enum": ["float32", "float64", "float16", "int32"]},
        "data": {**_NESTED, "description": "values in the shortest form that reads back exactly"},
    },
}
FIGURE: dict[str, Any] = {
    "type": "object",
    "required": ["data", "layout"],
    "properties": {
        "data": {"type": "array", "items": {"type": "object"}},
        "layout": {"type": "object"},
    },
    "description": "a Plotly figure (format=plotly), ready for Plotly.newPlot",
}
_CACHING = {
    "ETag": {"schema": {"type": "string"}, "description": "strong, from the canonical query"},
    "Cache-Control": {"schema": {"type": "string"}},
    "Vary": {"schema": {"type": "string"}},
}
_ARRAY_HEADERS = {
    **_CACHING,
    "X-Array-Shape": {"schema": {"type": "string"}, "description": "e.g. 128,512"},
    "X-Array-Dtype": {"schema": {"type": "string"}, "description": "float32, float64, …"},
}


def _array_answer() -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "description": "the array, in the format chosen by `format=` or else by Accept",
            "headers": _ARRAY_HEADERS,
            # Binary types first: some generators parse an answer by the first type listed.
            "content": {
                "application/octet-stream": _BINARY,
                "application/x-npy": _BINARY,
                "image/png": _BINARY,
                "text/csv": {"schema": {"type": "string"}},
                "application/json": {"schema": {"oneOf": [ENVELOPE, FIGURE]}},
            },
        },
        304: {"description": "If-None-Match named this answer: the cached copy is current"},
    }


_CHECK = {
    "type": "object",
    "required": ["name", "holds", "statistic", "value", "tolerance", "detail"],
    "properties": {
        "name": {"type": "string"},
        "holds": {
            "type": ["boolean", "null"],
            "description": "null when the property cannot apply to these parameters (detail "
            "says why)",
        },
        "statistic": {"type": "string"},
        "value": {"type": ["number", "null"]},
        "tolerance": {"type": "number"},
        "detail": {"type": "string"},
    },
}
_STATISTIC = {
    "type": "object",
    "required": ["name", "value", "detail"],
    "properties": {"name": {"type": "string"}, "value": {}, "detail": {"type": "string"}},
}
REPORT: dict[str, Any] = {
    "type": "object",
    "required": ["scheme", "params", "passed", "checks", "statistics"],
    "properties": {
        "scheme": {"type": "string"},
        "params": {"type": "object"},
        "passed": {"type": "boolean"},
        "checks": {"type": "array", "items": _CHECK},
        "statistics": {"type": "array", "items": _STATISTIC},
    },
}
CONFORMANCE: dict[str, Any] = {
    "type": "object",
    "required": [
        "scheme",
        "params",
        "conforms",
        "max_abs_error",
        "max_ulp_error",
        "first_bad_position",
        "error_by_position",
        "diagnosis",
    ],
    "properties": {
        "scheme": {"type": "string"},
        "params": {"type": "object"},
        "conforms": {"type": "boolean"},
        "max_abs_error": {"type": "number"},
        "max_ulp_error": {"type": "number"},
        "first_bad_position": {"type": ["integer", "null"]},
        "error_by_position": _NUMBERS,
        "diagnosis": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "summary", "evidence"],
                "properties": {
                    "name": {"type": "string"},
                    "summary": {"type": "string"},
                    "evidence": {"type": "object"},
                },
            },
        },
    },
}


def responses(scheme: Scheme, endpoint: str) -> dict[int | str, dict[str, Any]]:
    """The answers of one of ``scheme``'s operations, as they are sent."""
    if endpoint == "verify":
        answers: dict[int | str, dict[str, Any]] = {
            200: {
                "description": "the report: each check measured on the served array",
                "headers": _CACHING,
                "content": {"application/json": {"schema": REPORT}},
            },
            304: {"description": "If-None-Match named this answer"},
        }
    elif endpoint == "conformance":
        answers = {
            200: {
                "description": "the conformance report, or its error by position as a figure",
                "content": {"application/json": {"schema": {"oneOf": [CONFORMANCE, FIGURE]}}},
            }
        }
    else:
        answers = _array_answer()
    return {**answers, **PROBLEMS}


def extra_responses(extra: Extra) -> dict[int | str, dict[str, Any]]:
    answer = {"type": "object", **extra.answer_schema}
    content: dict[str, Any] = {"application/json": {"schema": answer}}
    ok: dict[str, Any] = {"description": extra.summary, "content": content}
    if extra.array is not None:
        content["application/x-npy"] = {"schema": {"type": "string", "format": "binary"}}
        ok["headers"] = {
            "X-Next-Position-Delta": {
                "schema": {"type": "string", "pattern": "^-?[0-9]+$"},
                "description": "format=npy: the decode delta the array leaves out",
            },
            **{name: _ARRAY_HEADERS[name] for name in ("X-Array-Shape", "X-Array-Dtype")},
        }
    if extra.incomplete is None:
        return {200: ok, **PROBLEMS}
    if extra.incomplete == "prefix":
        short = {
            "description": PROBLEMS[422]["description"] + ", or the file's first bytes stop "
            "before what is read from them (needed_bytes: how many to send)",
            "content": {"application/problem+json": {"schema": PREFIX_PROBLEM}},
        }
    else:
        short = {
            "description": PROBLEMS[422]["description"] + ", or the file keeps what is read "
            "in external data the body does not hold (type "
            "urn:posenc:problem:external-data-needed; needed: the byte ranges to send)",
            "content": {"application/problem+json": {"schema": EXTERNAL_PROBLEM}},
        }
    return {200: ok, **PROBLEMS, 422: short}


EXTRA_FORMAT: dict[str, Any] = {
    "name": "format",
    "in": "query",
    "required": False,
    "description": "json (the default), or npy: one sequence's int64 (3, n) ids alone",
    "schema": {"type": "string", "enum": ["json", "npy"], "default": "json"},
}


class FormatOnly(BaseModel):
    """The query of ``POST …/encode``: its parameters travel in the body."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: Format | None = Field(None, description="wins over the Accept header; default json")


ARRAY_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/x-npy": {"schema": {"type": "string", "format": "binary"}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["data"],
                "additionalProperties": False,
                "properties": {
                    "data": {
                        "type": "array",
                        "items": {**_NUMBERS, "minItems": 1},
                        "minItems": 1,
                    },
                },
            }
        },
    },
}
ARRAY_HEADERS: list[dict[str, Any]] = [
    {
        "name": "X-Array-Shape",
        "in": "header",
        "required": False,
        "description": "raw bodies (application/octet-stream): the shape, e.g. 128,512",
        "schema": {"type": "string", "pattern": SHAPE_PATTERN},
    },
    {
        "name": "X-Array-Dtype",
        "in": "header",
        "required": False,
        "description": "raw bodies: the values' type, little-endian",
        "schema": {"type": "string", "enum": ["float16", "float32", "float64", "int32"]},
    },
]
HEALTH: dict[str, Any] = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}},
}
_PARAMETER = {
    "type": "object",
    "required": ["name", "type", "default", "required", "rule"],
    "properties": {
        "name": {"type": "string"},
        "type": {"type": "string"},
        "default": {},
        "required": {"type": "boolean"},
        "rule": {"type": "string"},
        "minimum": {"type": ["number", "null"]},
        "maximum": {"type": ["number", "null"]},
        "exclusive_minimum": {"type": "boolean"},
        "multiple_of": {"type": ["integer", "null"]},
        "min_items": {"type": ["integer", "null"]},
        "max_items": {"type": ["integer", "null"]},
        "choices": {"type": ["array", "null"], "items": {"type": "string"}},
    },
}
SCHEMES_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["schemes"],
    "properties": {
        "schemes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "summary", "parameters", "endpoints", "paths"],
                "properties": {
                    "name": {"type": "string"},
                    "summary": {"type": "string"},
                    "parameters": {"type": "array", "items": _PARAMETER},
                    "components": {"type": "array", "items": {"type": "string"}},
                    "dtypes": {"type": "array", "items": {"type": "string"}},
                    "rows": {"type": "string"},
                    "endpoints": {"type": "array", "items": {"type": "string"}},
                    "paths": {"type": "object", "additionalProperties": {"type": "string"}},
                    "similarity": {"type": "boolean"},
                    "conformance": {"type": "boolean"},
                    "rotates": {"type": "boolean"},
                    "examples": {"type": "array", "items": {"type": "object"}},
                },
            },
        }
    },
}


# A JSON part of a form (a config.json): an object whose members the operation reads.
JSON_PART: dict[str, Any] = {"type": "object", "additionalProperties": True}


def extra_body(extra: Extra) -> dict[str, Any]:
    if extra.files:
        return _file_parts_body(extra)
    if extra.binary:
        file = {"type": "string", "format": "binary"}
        content: dict[str, Any] = {"application/octet-stream": {"schema": file}}
        if extra.parts:
            properties = {extra.name: file, **{name: JSON_PART for name in extra.parts}}
            form = {
                "type": "object",
                "required": [extra.name],
                "properties": properties,
                "additionalProperties": False,
            }
            content["multipart/form-data"] = {"schema": form}
        return {
            "required": True,
            "description": "the file's first bytes, up to POSENC_MAX_GGUF_BYTES"
            + (f"; with multipart/form-data, in the part {extra.name}" if extra.parts else ""),
            "content": content,
        }
    schema: dict[str, Any] = {"type": "object", **extra.body_schema}
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _file_parts_body(extra: Extra) -> dict[str, Any]:
    """multipart/form-data alone: parts of bytes, each described (a part that repeats, as an
    array of them), and JSON parts."""
    properties: dict[str, Any] = {}
    for file in extra.files:
        part = {"type": "string", "format": "binary", "description": file.description}
        properties[file.name] = {"type": "array", "items": part} if file.repeats else part
    properties.update({name: JSON_PART for name in extra.parts})
    form = {
        "type": "object",
        "required": [file.name for file in extra.files if file.required],
        "properties": properties,
        "additionalProperties": False,
    }
    return {
        "required": True,
        "description": "multipart/form-data, up to POSENC_MAX_GGUF_BYTES: "
        + ", ".join(file.name + (" (any number)" if file.repeats else "") for file in extra.files)
        + " (bytes, each with its own part headers)"
        + (f"; JSON: {', '.join(extra.parts)}" if extra.parts else ""),
        "content": {"multipart/form-data": {"schema": form}},
    }


def extra_parameters(extra: Extra) -> list[dict[str, Any]]:
    """The query parameters of an extra: its own, and format where it answers an array."""
    own = [
        {"name": q.name, "in": "query", "required": False, "description": q.description,
         "schema": q.schema}
        for q in extra.query
    ]  # fmt: skip
    return own + ([EXTRA_FORMAT] if extra.array is not None else [])


def encode_body(scheme: Scheme) -> dict[str, Any]:

    schema = model(scheme, "encode_body").model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    return {"required": True, "content": {"application/json": {"schema": schema}}}


summaries: dict[str, str] = {
    "table": "The array for consecutive positions",
    "encode": "The array for listed positions",
    "similarity": "How alike the encodings of two positions are",
    "verify": "Which properties hold, measured on the served array",
    "conformance": "Check your array against the exact one and diagnose it",
    "encode_body": "Encode positions, optionally added to your embeddings or rotating vectors",
}
descriptions: dict[str, str] = {
    "table": "The array for positions `offset … offset+seq_len-1` (grid schemes: every cell of "
    "`grid`). JSON, `.npy`, raw bytes (`bin`, with `X-Array-Shape`/`X-Array-Dtype`), CSV, a "
    "Plotly figure or a PNG heatmap. Cacheable forever: a strong ETag from the canonical query.",
    "encode": "The array for the listed `positions`, in the order given (grid schemes: cell "
    "indices).",
    "similarity": "Without `reference`: the `(seq_len, seq_len)` matrix of `metric` between the "
    "encodings of the table's positions; with `reference=p`: one row against position `p`, "
    "encoded with the table's positions (row `p - offset` of the matrix when `p` is among "
    "them; grid schemes: a cell index below the grid's size). Computed in float64.",
    "verify": "Each mathematical property the scheme promises, measured on the array this "
    "service serves for these parameters; `passed` when every check holds.",
    "conformance": "Send the array your code built, for positions `offset …`, as `.npy`, raw "
    'little-endian bytes with `X-Array-Shape`/`X-Array-Dtype`, or JSON `{"data": [[…]]}` '
    "(2-D arrays; read as `dtype`). The answer gives the error by position, the first bad "
    "position and a diagnosis whose findings each carry their evidence.",
    "encode_body": "Body: the scheme's parameters with `positions`, and optionally `embeddings` "
    "(returns `embeddings·(√d_model if scale) + PE(positions)`, computed in float64) or, for "
    "rotary schemes, `vectors` (returned rotated to their positions). Where the scheme turns a "
    "token by several ids, `position_ids` (and the options it names) in place of `positions`: "
    "the table at those ids.",
}
