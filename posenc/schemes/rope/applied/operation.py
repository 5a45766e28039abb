"""``POST /v1/rope/applied`` as an operation: what it costs, declared from the parts' headers
before any value is read, and its answer (:mod:`.answer`)."""

from __future__ import annotations

import math
from typing import Any

from posenc.cost import Cost
from posenc.declare import Limits, Sized, Upload
from posenc.schemes.rope.applied import answer, reader
from posenc.schemes.rope.applied.loops import STATS
from posenc.schemes.rope.applied.measure import BLOCK_VALUES, PAIRING_TOKENS

# Work units (≈ ns) per value of before: converting both arrays to float64 a block at a time,
# the finiteness checks, the pairing read on a spread of tokens, and the cells' pass (measured
# 17 ns a value over 2^24 values, 4096 tokens × 32 heads × 128).
WORK_PER_VALUE = 40
# Per value of the tokens read on a spread of the sequence (all of them, up to PAIRING_TOKENS):
# each pairing's lengths, then, where none keeps them, each pairing's cells for a narrower
# table's grid (:mod:`.table`), up to six passes (measured ≈ 9 ns a value a pass; a 1-token
# × 65536 × 128 body that is no rotation took 0.94× its work declared without this).
SPREAD_WORK_PER_VALUE = 60
# Per cell (a token and a pair): each recipe's rotations and their fit, for the stated rope and
# the fault that explains it, each fault tried on a spread of tokens first (measured: 1.1 µs a
# cell where nothing explains the angles, 262144 cells); three times the ids for M-RoPE's
# (3, n) (measured 2.5 µs).
WORK_PER_CELL = 4_000
WORK_PER_MROPE_CELL = 8_000
# Bytes per cell: the statistics (STATS float64), four recipes' fits kept side by side, and one
# recipe's rotations and fit being made (cos, sin, their power, offsets, errors: ~24 float64).
BYTES_PER_CELL = 8 * (STATS + 24) + 4 * 10
# Bytes per value of one block (:func:`.measure.Data.blocks`: BLOCK_VALUES values, or one head
# where a head holds more) of both arrays at once: each picked out of its array in its dtype,
# widened through uint32 (bfloat16), and converted to float64.
BYTES_PER_BLOCK_VALUE = 2 * (8 + 8 + 8)
FIXED = Cost(8 * 2**20, 50_000_000)


def size(given: Upload, limits: Limits) -> Sized:
    """What answering costs beyond the body: from the shapes the parts declare (``.npy``
    headers or part headers), checked against their lengths, before any value is read.
    ``before`` and ``after`` are there: the service refuses a request without a required
    part (``FileParam.required``), and the command takes both as arguments."""
    shape = reader.declared(given.files["before"][0], "before", reader.FLOATS).shape
    values = math.prod(shape)
    cells = _cells(shape, given.query)
    block = max(BLOCK_VALUES, _head(shape, given.query))
    ids, per_cell = 0, WORK_PER_CELL
    positions = given.file("positions")
    if positions is not None:
        stated = reader.declared(positions, "positions", reader.INTEGERS).shape
        ids = math.prod(stated)
        per_cell = WORK_PER_MROPE_CELL if len(stated) == 2 else WORK_PER_CELL
    cost = Cost(BYTES_PER_BLOCK_VALUE * block + BYTES_PER_CELL * cells + 8 * ids, 0)
    tokens = _tokens(shape, given.query)
    spread = values if tokens is None else values * min(1.0, PAIRING_TOKENS / tokens)
    work = WORK_PER_VALUE * values + math.ceil(SPREAD_WORK_PER_VALUE * spread) + per_cell * cells
    return Sized(FIXED + cost + Cost(0, work), 0, "before")


def _cells(shape: tuple[int, ...], query: dict[str, Any]) -> int:
    """Tokens × pairs of a head: at most half the values (one sample a token), fewer where
    the query's token axis and head width say so."""
    most = math.prod(shape) // 2
    tokens = _tokens(shape, query)
    return most if tokens is None else min(most, tokens * (_head(shape, query) // 2))


def _tokens(shape: tuple[int, ...], query: dict[str, Any]) -> int | None:
    """The tokens along the query's token axis; None where it names none (refused when read)."""
    axis = int(query.get("token_axis", 0))
    return shape[axis] if 0 <= axis < len(shape) - 1 else None


def _head(shape: tuple[int, ...], query: dict[str, Any]) -> int:
    return int(query.get("head_dim") or shape[-1])


def handle(given: Upload, limits: Limits) -> dict[str, Any]:
    """``POST /v1/rope/applied``: the answer for the parts and query of ``given``."""
    return answer.answer(
        given.files["before"][0],
        given.files["after"][0],
        given.file("positions"),
        given.parts.get("config"),
        given.query,
    )
