"""The service over HTTP, for ``--url``: the same questions the in-process path answers.

The standard library's client is enough for a handful of requests per run: no dependency to
install or to miss, and it starts in ~30 ms where httpx takes ~150 ms. Every failure — the
service unreachable, or its problem+json refusal — becomes :class:`Unanswered`, exit code 2.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

import click

# Long enough for the largest answer a service computes (its own deadline is 10 s by default).
_TIMEOUT_S = 120.0


class Unanswered(click.ClickException):
    exit_code = 2


def query(values: Mapping[str, Any]) -> str:
    """A query string in the API's spelling: lists comma-separated, booleans lower-case.

    >>> query({"d_model": 8, "grid": (2, 3), "bidirectional": False, "base": 500000.0})
    'd_model=8&grid=2%2C3&bidirectional=false&base=500000.0'
    """
    return urllib.parse.urlencode({name: _text(value) for name, value in values.items()})


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(_text(item) for item in value)
    return str(value)


def post_json(url: str, path: str, body: Any, params: Mapping[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode()
    with _open(url, path, params, data, {"Content-Type": "application/json"}) as answer:
        return json.load(answer)


def post_bytes(
    url: str, path: str, params: Mapping[str, Any], data: bytes, headers: Mapping[str, str]
) -> Any:
    with _open(url, path, params, data, headers) as answer:
        return json.load(answer)


# A part of a form: its name, filename (or None), bytes, and headers of its own.
FormPart = tuple[str, str | None, bytes, Mapping[str, str]]


def form(parts: Iterable[FormPart]) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body of ``parts``, and its Content-Type header.

    >>> body, headers = form([("config", None, b"{}", {})])
    >>> body.splitlines()[1:4], headers["Content-Type"].startswith("multipart/form-data")
    ([b'Content-Disposition: form-data; name="config"', b'', b'{}'], True)
    """
    boundary = uuid.uuid4().hex
    chunks = []
    for name, filename, data, headers in parts:
        named = f'name="{name}"' + ("" if filename is None else f'; filename="{filename}"')
        lines = [f"--{boundary}", f"Content-Disposition: form-data; {named}"]
        lines += [f"{key}: {value}" for key, value in headers.items()]
        chunks.append("\r\n".join([*lines, "", ""]).encode() + data + b"\r\n")
    content_type = f"multipart/form-data; boundary={boundary}"
    return b"".join(chunks) + f"--{boundary}--\r\n".encode(), {"Content-Type": content_type}


@contextmanager
def get(url: str, path: str, params: Mapping[str, Any]) -> Iterator[tuple[IO[bytes], int]]:
    """The answer's body as a stream, and its length (0 when the service does not say)."""
    with _open(url, path, params, None, {}) as answer:
        yield answer, int(answer.headers.get("Content-Length") or 0)


@contextmanager
def _open(
    url: str,
    path: str,
    params: Mapping[str, Any] | None,
    data: bytes | None,
    headers: Mapping[str, str],
) -> Iterator[Any]:
    target = url.rstrip("/") + path + (f"?{query(params)}" if params else "")
    request = urllib.request.Request(target, data=data, headers=dict(headers))
    try:
        answer = urllib.request.urlopen(request, timeout=_TIMEOUT_S)
    except urllib.error.HTTPError as e:
        raise Unanswered(_problem(e)) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise Unanswered(f"cannot reach the service at {url}: {reason}") from None
    with answer:
        yield answer


def _problem(error: urllib.error.HTTPError) -> str:
    """The service's own words (problem+json's detail and each error), else the status."""
    try:
        problem = json.loads(error.read())
    except ValueError:
        return f"the service answered {error.code} {error.reason}"
    messages = [
        f"{'.'.join(str(part) for part in item.get('loc', ())[1:] or item.get('loc', ()))}: "
        f"{item.get('msg')}"
        for item in problem.get("errors") or ()
    ]
    detail = problem.get("detail") or problem.get("title") or str(error.code)
    return "; ".join(messages) if messages else f"{detail} (HTTP {error.code})"
