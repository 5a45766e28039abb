"""What went in and what came out, read as rotations: the samples of each token laid out as
``(tokens, samples, head)`` (every axis but the token axis and the head's is more samples at the
same positions), a block of tokens at a time in float64, through the compiled loops of
:mod:`.loops`; which pairing keeps each pair's length; which columns outside the rope moved."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.errors import InconsistentError
from posenc.numerics import bfloat16
from posenc.schemes.rope.applied import loops
from posenc.schemes.rope.applied.reader import PRECISION, Given, check_axes
from posenc.schemes.rope.params import Layout

Float64Array = npt.NDArray[np.float64]
# Values of one array converted to float64 at a time: two such blocks stay in the L2 cache.
BLOCK_VALUES = 2**16
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

    def block(self, which: Given, tokens: slice | npt.NDArray[np.intp]) -> Float64Array:
        """The chosen tokens of ``which`` as ``(tokens, samples, head)`` float64."""
        moved = np.moveaxis(which.values, self.token_axis, 0)[tokens]
        if which.dtype == "bfloat16":
            moved = bfloat16.widened(moved)
        return np.ascontiguousarray(moved.reshape(len(moved), -1, self.head), np.float64)

    @property
    def floor(self) -> float:
        """The kernel's own arithmetic and its cos/sin rounding, in radians: two epsilons of
        the coarser of the two dtypes."""
        bits = min(PRECISION[self.before.dtype][0], PRECISION[self.after.dtype][0])
        return 2.0 ** (2 - bits)

    def precision(self, which: Given) -> tuple[int, int]:
        return PRECISION[which.dtype]

    def block_tokens(self) -> int:
        return max(1, BLOCK_VALUES // (self.samples * self.head))


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


def check_finite(given: Given, name: str) -> None:
    """Refuse NaN and infinity, naming where the first is: a pass over the bytes as given."""
    values = given.values
    if given.dtype == "bfloat16":
        bad = (values & 0x7F80) == 0x7F80
    else:
        bad = ~np.isfinite(values)
    if bad.any():
        where = [int(k) for k in np.argwhere(bad)[0]]
        raise InconsistentError(name, f"holds NaN or infinity, first at index {where}")


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
    tokens (all by default), a block at a time."""
    chosen = np.arange(given.tokens) if tokens is None else tokens
    out = np.empty((loops.STATS, len(chosen), columns.shape[1]))
    step = given.block_tokens()
    before, after = given.precision(given.before), given.precision(given.after)
    for start in range(0, len(chosen), step):
        checkpoint()
        at = chosen[start : start + step]
        x, y = given.block(given.before, at), given.block(given.after, at)
        part = out[:, start : start + len(at)]
        scratch = np.empty((loops.STATS, len(at), columns.shape[1]))
        loops.cells(x, y, columns, before, after, given.floor, scratch)
        part[...] = scratch
    return out


def moved(given: Data, columns: npt.NDArray[np.int64]) -> Float64Array:
    """How far each of ``columns`` moved, at most, in units of its rounding (≤ 1: still)."""
    largest = np.zeros(len(columns))
    if not len(columns):
        return largest
    step = given.block_tokens()
    before, after = given.precision(given.before), given.precision(given.after)
    for start in range(0, given.tokens, step):
        checkpoint()
        at = slice(start, start + step)
        x, y = given.block(given.before, at), given.block(given.after, at)
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
