"""A ``multipart/form-data`` body's parts, as views of the received bytes (no copy): a file
part beside small JSON ones, and parts that may repeat, each named by its filename. Every part
must be one the operation names, once unless it may repeat."""

from __future__ import annotations

import re
from collections.abc import Iterator

from posenc.errors import InconsistentError, ParameterError

_BOUNDARY = re.compile(r'boundary="?([^";]{1,70})"?', re.IGNORECASE)
_NAME = re.compile(rb'\bname="([^"]{1,64})"', re.IGNORECASE)
_FILENAME = re.compile(rb'\bfilename="([^"]{0,1024})"', re.IGNORECASE)

Files = dict[str, list[tuple[str, memoryview]]]


def split(body: bytearray, content_type: str, names: tuple[str, ...]) -> dict[str, memoryview]:
    """The parts of ``body`` by name; a part not in ``names``, given twice, or a body that is
    not multipart is a :class:`ParameterError` naming it."""
    return split_files(body, content_type, names, ())[0]


def split_files(
    body: bytearray, content_type: str, names: tuple[str, ...], repeated: tuple[str, ...]
) -> tuple[dict[str, memoryview], Files]:
    """:func:`split`, and the parts named in ``repeated`` (which may come many times), each as
    its filename and bytes, in the order sent; such a part without a filename is refused."""
    parts: dict[str, memoryview] = {}
    files: Files = {}
    for key, head, content in _parts(body, content_type):
        if key in repeated:
            filename = _FILENAME.search(head)
            if filename is None:
                # A rule the document states in prose (a schema of binary parts cannot).
                raise InconsistentError(key, "each such part needs its filename")
            files.setdefault(key, []).append(
                (filename.group(1).decode("utf-8", "replace"), content)
            )
            continue
        if key not in names or key in parts:
            raise ParameterError(
                key, f"is {'given twice' if key in parts else 'not a part'}: the parts are "
                f"{', '.join((*names, *repeated))}"
            )  # fmt: skip
        parts[key] = content
    return parts, files


def _parts(body: bytearray, content_type: str) -> Iterator[tuple[str, bytes, memoryview]]:
    found = _BOUNDARY.search(content_type)
    if found is None:
        raise ParameterError("content-type", "multipart/form-data needs its boundary parameter")
    delimiter = b"--" + found.group(1).encode("latin-1")
    view = memoryview(body)
    at = body.find(delimiter)
    if at < 0:
        raise ParameterError("body", "holds no part: its boundary never appears")
    while True:
        at += len(delimiter)
        if body[at : at + 2] == b"--":
            return
        head_end = body.find(b"\r\n\r\n", at)
        following = body.find(b"\r\n" + delimiter, at)
        if head_end < 0 or following < 0 or head_end > following:
            raise ParameterError("body", f"a part at byte {at} is not terminated by the boundary")
        head = bytes(view[at:head_end])
        name = _NAME.search(head)
        if name is None:
            raise ParameterError("body", f"the part at byte {at} has no name")
        yield name.group(1).decode("latin-1"), head, view[head_end + 4 : following]
        at = following + 2
