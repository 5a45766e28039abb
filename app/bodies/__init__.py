"""Request bodies, read at a cost known before their first byte arrives.

Nothing in a body is trusted: the header's shape must match the byte count, the dtype must be
one we compare in, and the table must be finite, non-empty and 1- to 3-D.

One module per thing a body is read as, in one package so that the handlers keep calling
``bodies.read_table``, ``bodies.receive`` … (file-name prefixes would spread the concern over
``app/``); this file only names what they call:

- :mod:`app.bodies.cost`: what reading B bytes holds and does, reserved before the read;
- :mod:`app.bodies.stream`: the bytes as they arrive, counted against that reservation;
- :mod:`app.bodies.table`: a client's table in the format its Content-Type names —
  :mod:`app.bodies.npy`, :mod:`app.bodies.raw` (X-Array-Shape, X-Array-Dtype) or JSON — and
  the rules every table keeps; :mod:`app.bodies.dtypes`, the types any of them may hold;
- :mod:`app.bodies.json_object`: a JSON object's small members as Python values and its large
  ones as NumPy arrays, parsed by :mod:`app.bodies.json_arrays` without a Python object per
  number; :mod:`app.bodies.json_text`, what the two share;
- :mod:`app.bodies.schema`: a JSON body held to the schema the OpenAPI document gives it;
- :mod:`app.bodies.multipart`: a multipart/form-data body's parts, as views of its bytes
  (with each part's own headers and filename, where an operation reads them);
- :mod:`app.bodies.upload`: an operation's file, or its form's parts, as an Upload.
"""

from __future__ import annotations

from app.bodies.cost import body_cost, chunked_limit
from app.bodies.json_arrays import positions_of
from app.bodies.json_object import read_object
from app.bodies.json_text import invalid
from app.bodies.multipart import parts, split
from app.bodies.schema import check_schema, validate
from app.bodies.stream import receive, receive_bounded
from app.bodies.table import read_table

__all__ = [
    "body_cost",
    "check_schema",
    "chunked_limit",
    "invalid",
    "parts",
    "positions_of",
    "read_object",
    "read_table",
    "receive",
    "receive_bounded",
    "split",
    "validate",
]
