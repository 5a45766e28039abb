"""What went in and what came out, read as rotations: the samples of each token laid out as
``(tokens, samples, head)`` (every axis but the token axis and the head's is more samples at the
same positions), a block of values at a time in float64 (tokens whole, or one token's samples
in pieces), through the compiled loops of
:mod:`.loops`; which pairing keeps each pair's length; which columns outside the rope moved."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.errors import InconsistentError
from posenc.numerics import bfloat16
from posenc.schemes.rope.applied import loops
from posenc.schemes.rope.applied.reader import PRECISION, Given, check_axes
from posenc.schemes.rope.params import Layout

Float64Array = npt.NDArray[np.float64]
# What picks a block of values out of an array viewed as (tokens, sample axes …, head).
Piece = tuple[Any, ...]
# Values of one array converted to float64 at a time: two such blocks stay in the L2 cache.
BLOCK_VALUES = 2**16
# The magnitudes read (only float64 holds more): a cell's sums of products of two values stay
# within float64's range, 2^1024, over up to 2^63 samples.
LARGEST = 2.0**480
# Tokens read to decide the pairing before the whole pass: spread over the sequence.
PAIRING_TOKENS = 64


@dataclass(frozen=True)
class Data:
    """``before`` and ``after`` with their axes: ``tokens`` along ``token_axis``, heads of
    ``head`` values (the last axis, or its ``head_dim``-wide pieces), ``samples`` vectors a
    token."""

    before: Given
    after: Given
    token_axis: int
    head: int
    tokens: int
    samples: int
    # The type of a cos/sin table narrower than the data, if the kernel's was (:mod:`.table`):
    # its rounding joins the data's in every cell's resolution.
    table: str | None = None

    def block(self, which: Given, piece: Piece) -> Float64Array:
        """The values ``piece`` picks of ``which`` (its axes: tokens, the sample axes, the
        head) as ``(tokens, samples, head)`` float64."""
        moved = np.moveaxis(which.values, self.token_axis, 0)
        split = moved.reshape(*moved.shape[:-1], moved.shape[-1] // self.head, self.head)
        picked = split[piece]
        if which.dtype == "bfloat16":
            picked = bfloat16.widened(picked)
        return np.ascontiguousarray(picked.reshape(len(picked), -1, self.head), np.float64)

    def blocks(self, tokens: npt.NDArray[np.intp] | None) -> Iterator[tuple[slice, list[Piece]]]:
        """The chosen tokens (all where None) a block at a time: the rows of the cells each
        fills, and its pieces of at most BLOCK_VALUES values of each array (one sample where a
        head holds more). Tokens whose samples fit come whole, several a block; a token whose
        samples do not is one block of several pieces, in order."""
        count = self.tokens if tokens is None else len(tokens)
        per_token = self.samples * self.head
        if per_token <= BLOCK_VALUES:
            step = BLOCK_VALUES // per_token
            for start in range(0, count, step):
                rows = slice(start, start + step)
                yield rows, [(rows if tokens is None else tokens[rows],)]
            return
        axes = self.before.shape[: self.token_axis] + self.before.shape[self.token_axis + 1 :]
        dims = (*axes[:-1], axes[-1] // self.head)
        for row in range(count):
            token = row if tokens is None else int(tokens[row])
            at = slice(token, token + 1)
            yield slice(row, row + 1), [(at, *cut) for cut in _cuts(dims, self.head)]

    @property
    def floor(self) -> float:
        """The kernel's own arithmetic and its cos/sin rounding, in radians: two epsilons of
        the coarsest of the two dtypes and the table's."""
        table = PRECISION[self.table][0] if self.table is not None else 53
        bits = min(PRECISION[self.before.dtype][0], PRECISION[self.after.dtype][0], table)
        return 2.0 ** (2 - bits)

    def precision(self, which: Given) -> tuple[int, int]:
        return PRECISION[which.dtype]


def _cuts(dims: tuple[int, ...], head: int) -> Iterator[Piece]:
    """One token's samples (sample axes ``dims``, then the head) cut in order into pieces of at
    most BLOCK_VALUES values, or of one sample: the trailing axes that fit whole, and slices
    of the axis before them."""
    cut, whole = len(dims), head
    while cut and whole * dims[cut - 1] <= BLOCK_VALUES:
        cut -= 1
        whole *= dims[cut]
    if not cut:
        yield ()
        return
    step = max(1, BLOCK_VALUES // whole)
    for outer in np.ndindex(*dims[: cut - 1]):
        for start in range(0, dims[cut - 1], step):
            yield (*outer, slice(start, start + step))


def data(before: Given, after: Given, token_axis: int, head_dim: int | None) -> Data:
    """The two arrays with their axes, after the checks that need no pass over the values."""
    if before.shape != after.shape:
        raise InconsistentError(
            "after", f"has shape {list(after.shape)}, before's is {list(before.shape)}: a "
            "kernel returns what it was given, turned"
        )  # fmt: skip
    shape = before.shape
    check_axes(shape, "before")  # arrays in hand (posenc.testing) were never declared
    if not 0 <= token_axis < len(shape) - 1:
        raise InconsistentError(
            "token_axis", f"must name one of the axes 0 … {len(shape) - 2} (the last holds the "
            f"heads), got {token_axis}"
        )  # fmt: skip
    last = shape[-1]
    head = last if head_dim is None else head_dim
    if last % head:
        raise InconsistentError(
            "head_dim", f"{head} does not divide the last axis of before, {last} values"
        )
    tokens = shape[token_axis]
    samples = math.prod(shape) // (tokens * head)
    return Data(before, after, token_axis, head, tokens, samples)


def check_values(given: Given, name: str) -> None:
    """Refuse NaN, infinity and magnitudes of LARGEST or more, naming where the first is (in
    the order the values are stored): a pass over the bytes as given, a block at a time."""
    values = given.values
    order: Literal["C", "F"] = "C"
    if values.flags.f_contiguous and not values.flags.c_contiguous:
        order = "F"
    stored = values.reshape(-1, order=order)  # a view of a part's bytes, read in place
    for start in range(0, len(stored), BLOCK_VALUES):
        block = stored[start : start + BLOCK_VALUES]
        if given.dtype == "bfloat16":
            bad = (block & 0x7F80) == 0x7F80
        elif given.dtype == "float64":
            bad = ~(np.abs(block) < LARGEST)
        else:
            bad = ~np.isfinite(block)
        if not bad.any():
            continue
        at = start + int(np.argmax(bad))
        where = [int(k) for k in np.unravel_index(at, values.shape, order=order)]
        value = float(stored[at]) if given.dtype != "bfloat16" else math.nan
        if not math.isfinite(value):
            raise InconsistentError(name, f"holds NaN or infinity, first at index {where}")
        raise InconsistentError(
            name, f"holds {value:.6g} at index {where}: a kernel's values are read below 2^480 "
            "(≈ 3.1e144) in magnitude, where their products stay within float64's range"
        )  # fmt: skip


def pairs(layout: Layout, offset: int, width: int, relaid: bool = False) -> npt.NDArray[np.int64]:
    """The columns of each pair ``(4, width/2)``: its two columns in ``before``, then in
    ``after`` — ``(i, i + w/2)`` for ``split``, ``(2i, 2i + 1)`` for ``interleaved``;
    ``relaid``: read interleaved, written split (DeepSeek's q/k against a rotate_half cache)."""
    half = width // 2
    i = np.arange(half, dtype=np.int64)
    split = np.stack([offset + i, offset + half + i])
    interleaved = np.stack([offset + 2 * i, offset + 2 * i + 1])
    read = interleaved if relaid or layout == "interleaved" else split
    written = split if relaid or layout == "split" else interleaved
    return np.concatenate([read, written])


def cells(
    given: Data, columns: npt.NDArray[np.int64], tokens: npt.NDArray[np.intp] | None = None
) -> Float64Array:
    """The statistics (:mod:`.loops`) of every cell ``(STATS, tokens, pairs)`` of the chosen
    tokens (all by default), a block at a time: the sums of a cell's samples, then their
    intervals about the mean the sums give."""
    count = given.tokens if tokens is None else len(tokens)
    out = np.empty((loops.STATS, count, columns.shape[1]))
    out[...] = loops.INITIAL[:, None, None]
    before, after = given.precision(given.before), given.precision(given.after)
    for rows, pieces in given.blocks(tokens):
        part = out[:, rows]
        if len(pieces) == 1:  # whole tokens: each array's block is converted once
            checkpoint()
            x, y = given.block(given.before, pieces[0]), given.block(given.after, pieces[0])
            loops.sums(x, y, columns, part)
            loops.spreads(x, y, columns, before, after, given.floor, part)
            continue
        for piece in pieces:
            checkpoint()
            loops.sums(
                given.block(given.before, piece), given.block(given.after, piece), columns, part
            )
        for piece in pieces:
            checkpoint()
            x, y = given.block(given.before, piece), given.block(given.after, piece)
            loops.spreads(x, y, columns, before, after, given.floor, part)
    return out


def moved(given: Data, columns: npt.NDArray[np.int64]) -> Float64Array:
    """How far each of ``columns`` moved, at most, in units of its rounding (≤ 1: still)."""
    largest = np.zeros(len(columns))
    if not len(columns):
        return largest
    before, after = given.precision(given.before), given.precision(given.after)
    for _, pieces in given.blocks(None):
        for piece in pieces:
            checkpoint()
            x, y = given.block(given.before, piece), given.block(given.after, piece)
            loops.still(x, y, columns, before, after, largest)
    return largest


def spread_tokens(count: int, most: int = PAIRING_TOKENS) -> npt.NDArray[np.intp]:
    return np.unique(np.linspace(0, count - 1, min(count, most)).round().astype(np.intp))


@dataclass(frozen=True)
class Lengths:
    """How one pairing keeps lengths: the fraction of cells (with a sample read) whose ratio
    interval holds one magnitude, that magnitude, and the cells read."""

    kept: float
    magnitude: float | None
    read: int


def lengths(stats: Float64Array) -> Lengths:
    """Whether a single magnitude fits every cell: the median of the cells' ratio intervals'
    middles, and the share of cells whose interval holds it."""
    read = stats[loops.READ] > 0
    low, high = stats[loops.RATIO_LOW][read], stats[loops.RATIO_HIGH][read]
    if not len(low):
        return Lengths(0.0, None, 0)
    magnitude = float(np.median((low + high) / 2))
    kept = float(np.mean((low <= magnitude) & (magnitude <= high)))
    return Lengths(kept, magnitude, int(read.sum()))
