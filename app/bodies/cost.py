"""What reading a body costs, from its size alone, so that it is reserved before it is read.

- binary bodies (``.npy``, raw) are the received bytes viewed by ``np.frombuffer``; a byte-order
  or Fortran-order conversion is the one copy. Peak: ``2·B`` plus a fixed slack.
- JSON bodies never become a Python object per number. The large numeric arrays (``positions``,
  ``embeddings``, ``vectors``, ``data``) are found by a vectorised scan of the bytes and parsed
  in bounded slices straight into one NumPy array (:mod:`app.bodies.json_arrays`); only the
  small members (``d_model``, ``scheme`` …, at most ``SMALL_MEMBERS_BYTES`` of
  :mod:`app.bodies.json_text` together) become Python values for pydantic. Every number takes
  at least two bytes of JSON (a digit and a separator) and at most eight bytes of array, so
  the arrays hold at most ``4·B``; with the body itself, ``5·B``.
"""

from __future__ import annotations

from posenc.cost import Cost

# Peak bytes held while a JSON body of B bytes is read and parsed: the body, plus arrays of at
# most 8 bytes per number at 2 bytes of JSON per number. Measured (tracemalloc, 16 MiB bodies):
# 5.34·B for "0,0,…" positions, 5.23·B for embeddings or float64 data of zeros, 3.3·B for
# float32 data of zeros, 1.7–1.9·B for realistic random floats; tests/api/test_bodies.py holds
# every kind under the model.
JSON_PARSE_BYTES_PER_BODY_BYTE = 5
# The received bytes and the one copy a byte-order or Fortran-order conversion makes.
BINARY_READ_BYTES_PER_BODY_BYTE = 2
# Working memory whatever the body's size: one parsed slice as Python numbers and one scan
# block (≈ 6 MiB measured), and the small members as Python values (≤ 1 MiB of JSON, ≤ 18 MiB
# of objects in the worst nesting).
PARSE_FIXED_BYTES = 24 * 2**20
# Work units (≈ ns on one core) per body byte; measured CPU time: ≤ 13 ns/B for JSON (worst:
# one-digit positions), ≈ 1 ns/B for a binary body's view and finite check.
JSON_PARSE_WORK_PER_BODY_BYTE = 20
BINARY_READ_WORK_PER_BODY_BYTE = 2


def _bytes_per_body_byte(media_type: str) -> tuple[int, int]:
    if media_type.split(";")[0].strip().lower() == "application/json":
        return JSON_PARSE_BYTES_PER_BODY_BYTE, JSON_PARSE_WORK_PER_BODY_BYTE
    return BINARY_READ_BYTES_PER_BODY_BYTE, BINARY_READ_WORK_PER_BODY_BYTE


def body_cost(content_length: int, media_type: str) -> Cost:
    """Peak bytes and work of reading and parsing a body of ``content_length`` bytes.

    >>> body_cost(1000, "application/json; charset=utf-8")
    Cost(bytes=25170824, work=20000)
    >>> body_cost(1000, "application/x-npy").bytes - PARSE_FIXED_BYTES
    2000
    """
    per_byte, work = _bytes_per_body_byte(media_type)
    return Cost(per_byte * content_length + PARSE_FIXED_BYTES, work * content_length)


def chunked_limit(max_body_bytes: int, memory_bytes: int, media_type: str) -> int:
    """The most a body sent without Content-Length may hold: its size is unknown when it is
    admitted, so it reserves the cost of this many bytes — at most a quarter of the memory
    budget — while it streams, is refused past it, and keeps only what its real size costs
    once it has arrived (``app.handlers._read_body``).

    >>> chunked_limit(64 * 2**20, 256 * 2**20, "application/json")
    8388608
    """
    per_byte, _ = _bytes_per_body_byte(media_type)
    fits = (memory_bytes // 4 - PARSE_FIXED_BYTES) // per_byte
    return max(0, min(max_body_bytes, fits))
