"""A ``multipart/form-data`` body's parts, as views of the received bytes (no copy): a file
part beside small JSON ones, or several parts of bytes each with its own headers (an array's
``X-Array-Shape``) and filename (a range of a file, ``<location>@<offset>``). Every part must
be one the operation names, once unless it may repeat."""

from __future__ import annotations

import re

from posenc.declare import Part
from posenc.errors import InconsistentError, LimitError, ParameterError

_BOUNDARY = re.compile(r'boundary="?([^";]{1,70})"?', re.IGNORECASE)
_NAME = re.compile(r'\bname="([^"]{1,64})"', re.IGNORECASE)
_FILENAME = re.compile(r'\bfilename="([^"]{0,1024})"', re.IGNORECASE)
# A part's headers are a few lines; more than this is not a part this service reads.
_MOST_HEADER_BYTES = 8192
# No operation reads more parts than this (an ONNX model's external ranges are the most): a
# body of more is refused as it is read, before its parts are gathered.
MOST_PARTS = 4096


def split(body: bytearray, content_type: str, names: tuple[str, ...]) -> dict[str, memoryview]:
    """The parts of ``body`` by name; a part not in ``names``, given twice, or a body that is
    not multipart is a :class:`ParameterError` naming it."""
    given = parts(body, content_type, names)
    return {name: memoryview(sent[0].data) for name, sent in given.items()}


def parts(
    body: bytearray, content_type: str, names: tuple[str, ...], repeated: tuple[str, ...] = ()
) -> dict[str, tuple[Part, ...]]:
    """:func:`split`, each part with its headers (names in lower case) and filename; a part
    named in ``repeated`` may come many times, each with its filename, in the order sent."""
    found = _BOUNDARY.search(content_type)
    if found is None:
        raise ParameterError("content-type", "multipart/form-data needs its boundary parameter")
    delimiter = b"--" + found.group(1).encode("latin-1")
    view = memoryview(body)
    given: dict[str, list[Part]] = {}
    count = 0
    at = body.find(delimiter)
    if at < 0:
        raise ParameterError("body", "holds no part: its boundary never appears")
    while True:
        at += len(delimiter)
        if body[at : at + 2] == b"--":
            return {name: tuple(sent) for name, sent in given.items()}
        count += 1
        if count > MOST_PARTS:
            raise LimitError("body", f"holds more than {MOST_PARTS} parts")
        head_end = body.find(b"\r\n\r\n", at, at + _MOST_HEADER_BYTES)
        following = body.find(b"\r\n" + delimiter, at)
        if head_end < 0 or following < 0 or head_end > following:
            raise ParameterError("body", f"a part at byte {at} is not terminated by the boundary")
        part = _part(bytes(view[at:head_end]).decode("latin-1"), view[head_end + 4 : following])
        key = _name(part, at)
        if key not in (*names, *repeated) or (key in given and key not in repeated):
            raise ParameterError(
                key, f"is {'given twice' if key in given else 'not a part'}: the parts are "
                f"{', '.join((*names, *repeated))}"
            )  # fmt: skip
        if key in repeated and part.filename is None:
            # A rule the document states in prose (a schema of binary parts cannot).
            raise InconsistentError(key, "each such part needs its filename")
        given.setdefault(key, []).append(part)
        at = following + 2


def _part(head: str, data: memoryview) -> Part:
    pairs = (line.partition(":") for line in head.split("\r\n") if ":" in line)
    headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
    filename = _FILENAME.search(headers.get("content-disposition", ""))
    if filename is None:
        return Part(data, headers)
    # Headers travel as bytes: a filename's are UTF-8 (RFC 7578), read above as latin-1.
    return Part(data, headers, filename.group(1).encode("latin-1").decode("utf-8", "replace"))


def _name(part: Part, at: int) -> str:
    name = _NAME.search(part.headers.get("content-disposition", ""))
    if name is None:
        raise ParameterError("body", f"the part at byte {at} has no name")
    return name.group(1)
