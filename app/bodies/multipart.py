"""A ``multipart/form-data`` body's parts, as views of the received bytes (no copy): a file
part beside small JSON ones, or several parts of bytes each with its own headers (an array's
``X-Array-Shape``). Every part must be one the operation names, once."""

from __future__ import annotations

import re

from posenc.declare import Part
from posenc.errors import ParameterError

_BOUNDARY = re.compile(r'boundary="?([^";]{1,70})"?', re.IGNORECASE)
_NAME = re.compile(rb'\bname="([^"]{1,64})"', re.IGNORECASE)
# A part's headers are a few lines; more than this is not a part this service reads.
_MOST_HEADER_BYTES = 8192


def split(body: bytearray, content_type: str, names: tuple[str, ...]) -> dict[str, memoryview]:
    """The parts of ``body`` by name; a part not in ``names``, given twice, or a body that is
    not multipart is a :class:`ParameterError` naming it."""
    return {name: memoryview(part.data) for name, part in parts(body, content_type, names).items()}


def parts(body: bytearray, content_type: str, names: tuple[str, ...]) -> dict[str, Part]:
    """:func:`split`, each part with its headers (names in lower case)."""
    found = _BOUNDARY.search(content_type)
    if found is None:
        raise ParameterError("content-type", "multipart/form-data needs its boundary parameter")
    delimiter = b"--" + found.group(1).encode("latin-1")
    view = memoryview(body)
    given: dict[str, Part] = {}
    at = body.find(delimiter)
    if at < 0:
        raise ParameterError("body", "holds no part: its boundary never appears")
    while True:
        at += len(delimiter)
        if body[at : at + 2] == b"--":
            break
        head_end = body.find(b"\r\n\r\n", at, at + _MOST_HEADER_BYTES)
        following = body.find(b"\r\n" + delimiter, at)
        if head_end < 0 or following < 0 or head_end > following:
            raise ParameterError("body", f"a part at byte {at} is not terminated by the boundary")
        head = bytes(view[at:head_end])
        name = _NAME.search(head)
        if name is None:
            raise ParameterError("body", f"the part at byte {at} has no name")
        key = name.group(1).decode("latin-1")
        if key not in names or key in given:
            raise ParameterError(
                key, f"is {'given twice' if key in given else 'not a part'}: the parts are "
                f"{', '.join(names)}"
            )  # fmt: skip
        given[key] = Part(view[head_end + 4 : following], _headers(head))
        at = following + 2
    return given


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")
    pairs = (line.partition(":") for line in lines if ":" in line)
    return {name.strip().lower(): value.strip() for name, _, value in pairs}
