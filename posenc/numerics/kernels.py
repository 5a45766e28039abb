"""Compiled loops for whole tables: one pass per block, written straight into the output.

The NumPy paths (:func:`posenc.numerics.rotation.fill_consecutive`,
:func:`posenc.numerics.exact.sincos`) are the reference; these loops repeat their arithmetic
operation for operation (no fused multiply-add, no reassociation: numba compiles without
``fastmath``), so a table built here is bit for bit the table built there, and every bound
proved for the reference holds. What they save is memory traffic: the reference makes ~10 passes
over float64 temporaries the size of a block and then casts into the output; here a row is
rotated, scanned for values near zero and rounded into the output while it is still in
registers.

Sines and cosines of the reduced angle still come from NumPy (``np.sin``/``np.cos`` on a
block that stays in the L2 cache): a compiled ``sin`` is the platform's libm, which need not
agree with NumPy's to the last bit.

Where values go is a *store mode*; ``out`` is always 3-D ``(planes, rows, columns)``:

- ``SIN_COS_INTERLEAVED``: plane 0, ``sin`` at ``2j``, ``cos`` at ``2j+1`` for ``j < cosines``;
- ``SIN_COS_SPLIT``: plane 0, ``sin`` at ``j``, ``cos`` at ``h + j`` for ``j < cosines``;
- ``ROPE_SPLIT``: ``scale·cos`` at ``j`` and ``h + j`` of plane ``cos_plane``, ``scale·sin``
  likewise in ``sin_plane`` (a plane ``< 0`` is not written);
- ``ROPE_INTERLEAVED``: the same at ``2j`` and ``2j + 1``.

Why one module: every loop here writes into buffers whose sizes the Python wrappers below work
out (``_small_slots``, ``EXACT_BLOCK``), and the bounds argument that keeps them from writing
past a heap block (issue 20's segfault) is one argument across loop and wrapper; it is kept where
it can be read in one place.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.cost import Cost
from posenc.numerics.exact import (
    _SPLITTER,
    _TWO_PI_A,
    _TWO_PI_B,
    _TWO_PI_HI,
    _TWO_PI_LO,
    Turns,
    fault_in,
)
from posenc.numerics.rotation import BLOCK, SMALL

SIN_COS_INTERLEAVED, SIN_COS_SPLIT, ROPE_SPLIT, ROPE_INTERLEAVED = 0, 1, 2, 3
_SPAN = BLOCK * BLOCK
# Elements per block of the exact path: five float64 buffers of this size (320 KiB) stay in
# the L2 cache and keep the working memory a small fraction of any large table.
EXACT_BLOCK = 8192
# Values per call of the rotation loop (≈ 1 ms here): a checkpoint between calls.
_ROTATION_CALL = 1 << 20
# Where someone waits for finished rows (a response sends them as they come), a call holds
# at most this many (1 MiB of float32): each report hands the GIL to the event loop and back,
# and at 2^16 those handoffs made a 4 MiB table 0.5 ms slower to stream, 32 MiB 3 ms; at 2^18
# it streams as fast as it computes (in process, send taking no time).
_REPORTED_CALL = 1 << 18
# Room for the positions of values near zero found in one call; more stops the call early.
_SMALL_SLOTS = 8192


def _jit(function: Any) -> Any:
    """nogil: the loops run in several threads at once (``threads=``); cache: compiled once per
    machine into NUMBA_CACHE_DIR (or __pycache__), not at every start — where no such place is
    writable, compiled in memory instead (numba refuses to cache without one).

    boundscheck=False: no index is checked in a loop, so every index a loop computes is proved
    in range where it is called (the comments at each call say why), and the Python wrappers
    check the one size a loop cannot see (how many values a buffer must take). NUMBA_BOUNDSCHECK=1
    turns the checks on for a test run, but only for loops compiled in that run: numba's cache
    is not keyed by it, so such a run needs a NUMBA_CACHE_DIR of its own."""
    try:
        return numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False)(function)
    except RuntimeError:
        return numba.njit(nogil=True, error_model="numpy", boundscheck=False)(function)


@dataclass(frozen=True)
class Store:
    """Where the sines and cosines of a row go (see the module docstring)."""

    mode: int
    cosines: int  # frequencies that have a cosine column (sinusoids with odd d_model: h − 1)
    sin_plane: int = 0
    cos_plane: int = 0
    scale: float = 1.0


@_jit
def _store_row(
    out: Any, r: int, s: Any, c: Any, mode: int, cc: int, sp: int, cp: int, scale: float
) -> None:
    # In bounds: _store_args proved out exactly as wide as this mode writes for h = len(s)
    # (2h − 1 or 2h, h + cc) with planes sp and cp; each caller passes a row r < out.shape[1].
    h = s.shape[0]
    if mode == SIN_COS_INTERLEAVED:
        row = out[0, r]
        for j in range(cc):
            row[2 * j] = s[j]
            row[2 * j + 1] = c[j]
        for j in range(cc, h):
            row[2 * j] = s[j]
    elif mode == SIN_COS_SPLIT:
        row = out[0, r]
        for j in range(h):
            row[j] = s[j]
        for j in range(cc):
            row[h + j] = c[j]
    else:
        for plane, values in ((cp, c), (sp, s)):
            if plane < 0:
                continue
            row = out[plane, r]
            if mode == ROPE_SPLIT:
                for j in range(h):
                    v = values[j] * scale
                    row[j] = v
                    row[h + j] = v
            else:
                for j in range(h):
                    v = values[j] * scale
                    row[2 * j] = v
                    row[2 * j + 1] = v


@_jit
def _store_one(
    out: Any,
    r: int,
    j: int,
    is_cos: int,
    v: float,
    h: int,
    mode: int,
    sp: int,
    cp: int,
    scale: float,
) -> None:
    # In bounds as _store_row: j < h, and is_cos only for j < cc (the codes are made so).
    if mode == SIN_COS_INTERLEAVED:
        out[0, r, 2 * j + is_cos] = v
    elif mode == SIN_COS_SPLIT:
        out[0, r, j + h * is_cos] = v
    else:
        plane = cp if is_cos else sp
        if plane < 0:
            return
        v = v * scale
        if mode == ROPE_SPLIT:
            out[plane, r, j] = v
            out[plane, r, h + j] = v
        else:
            out[plane, r, 2 * j] = v
            out[plane, r, 2 * j + 1] = v


@_jit
def _rotate_rows(
    out: Any,
    first: int,
    stop: int,
    supers: Any,
    coarse: Any,
    fine: Any,
    mode: int,
    cc: int,
    sp: int,
    cp: int,
    scale: float,
    small: Any,
    row_s: Any,
    row_c: Any,
    anchor_r: Any,
    anchor_i: Any,
) -> tuple[int, int]:
    """Rows ``first …`` up to ``stop`` by two rotations (:mod:`.rotation`); returns the
    next row and how many codes ``row·2h + 2j + is_cos`` of values below SMALL it left in
    ``small``. Stops early, at a row boundary, when ``small`` could not hold another row.

    In bounds: ``r < stop ≤`` the rows of ``out`` (a view starting at the part's first row),
    ``supers`` holds ``⌈rows / BLOCK²⌉`` anchors so ``m`` is one of them, ``k, k2 < BLOCK``
    index the twiddles, every buffer is ``h`` wide, and a row adds at most ``h + cc ≤ 2h``
    codes to ``small`` after the loop checked that ``2h`` slots were left."""
    h = supers.shape[2]
    count = 0
    r = first
    room = small.shape[0] - 2 * h
    while r < stop and count <= room:
        m = r // _SPAN
        k = (r // BLOCK) % BLOCK
        for j in range(h):
            sr, si = supers[0, m, j], supers[1, m, j]
            cr, ci = coarse[0, k, j], coarse[1, k, j]
            anchor_r[j] = sr * cr - si * ci
            anchor_i[j] = sr * ci + si * cr
        last = min(stop, r - r % BLOCK + BLOCK)
        while r < last and count <= room:
            k2 = r % BLOCK
            found = 0
            for j in range(h):
                fr, fi = fine[0, k2, j], fine[1, k2, j]
                s = anchor_r[j] * fr - anchor_i[j] * fi
                c = anchor_r[j] * fi + anchor_i[j] * fr
                row_s[j] = s
                row_c[j] = c
                found += (abs(s) < SMALL) + (abs(c) < SMALL)
            if found:
                for j in range(h):
                    if abs(row_s[j]) < SMALL:
                        small[count] = r * 2 * h + 2 * j
                        count += 1
                for j in range(cc):
                    if abs(row_c[j]) < SMALL:
                        small[count] = r * 2 * h + 2 * j + 1
                        count += 1
            _store_row(out, r, row_s, row_c, mode, cc, sp, cp, scale)
            r += 1
    return r, count


@_jit
def _reduce(p: float, hi: float, lo: float, hi_a: float, hi_b: float) -> tuple[float, float, float]:
    # posenc.numerics.exact._sincos up to np.sin/np.cos, operation for operation.
    p_a = np.floor(p * 2.0**-16) * 2.0**16
    p_b = p - p_a
    whole = p * hi
    tail = ((p_a * hi_a - whole) + p_a * hi_b + p_b * hi_a) + p_b * hi_b
    tail += p * lo
    fraction = whole - np.rint(whole)
    quarter = np.rint(4.0 * fraction)
    fraction -= 0.25 * quarter
    r_hi = fraction + tail
    bb = r_hi - fraction
    r_lo = (fraction - (r_hi - bb)) + (tail - bb)
    a_hi = r_hi * _TWO_PI_HI
    scaled = _SPLITTER * r_hi
    r_a = scaled - (scaled - r_hi)
    r_b = r_hi - r_a
    a_lo = ((r_a * _TWO_PI_A - a_hi) + r_a * _TWO_PI_B + r_b * _TWO_PI_A) + r_b * _TWO_PI_B
    a_lo += r_hi * _TWO_PI_LO + r_lo * _TWO_PI_HI
    return a_hi, a_lo, quarter


@_jit
def _reduce_grid(
    first: float,
    step: float,
    rows: int,
    hi: Any,
    lo: Any,
    hi_a: Any,
    hi_b: Any,
    a_hi: Any,
    a_lo: Any,
    q: Any,
) -> None:
    # In bounds: rows·h values, which _Exact._room checked against the buffers first.
    h = hi.shape[0]
    for i in range(rows):
        p = first + step * i
        for j in range(h):
            a_hi[i * h + j], a_lo[i * h + j], q[i * h + j] = _reduce(
                p, hi[j], lo[j], hi_a[j], hi_b[j]
            )


@_jit
def _reduce_codes(
    offset: float,
    codes: Any,
    h: int,
    hi: Any,
    lo: Any,
    hi_a: Any,
    hi_b: Any,
    a_hi: Any,
    a_lo: Any,
    q: Any,
) -> None:
    # In bounds: len(codes) values, checked by _Exact._room; a code's column is below 2h.
    for k in range(codes.shape[0]):
        r, column = divmod(codes[k], 2 * h)
        j = column // 2
        a_hi[k], a_lo[k], q[k] = _reduce(offset + r, hi[j], lo[j], hi_a[j], hi_b[j])


@_jit
def _unfold(sin_a: Any, cos_a: Any, a_lo: Any, q: Any, count: int) -> None:
    # The first-order correction and posenc.numerics.exact._rotate_by_quarters, in place. In bounds:
    # count values were just written by _reduce_grid or _reduce_codes, within the buffers.
    for k in range(count):
        s, c, t = sin_a[k], cos_a[k], a_lo[k]
        s, c = s + c * t, c - s * t
        quarter = q[k] % 4.0
        if quarter % 2.0 == 1.0:
            s, c = c, s
        sin_a[k] = s * (-1.0 if quarter >= 2.0 else 1.0)
        cos_a[k] = c * (-1.0 if quarter == 1.0 or quarter == 2.0 else 1.0)


@_jit
def _store_rows(
    out: Any,
    first: int,
    rows: int,
    h: int,
    s: Any,
    c: Any,
    mode: int,
    cc: int,
    sp: int,
    cp: int,
    scale: float,
) -> None:
    # In bounds: s and c hold rows·h values, and first + rows ≤ the rows of out (exact_table).
    for i in range(rows):
        _store_row(
            out, first + i, s[i * h : (i + 1) * h], c[i * h : (i + 1) * h], mode, cc, sp, cp, scale
        )


@_jit
def _store_codes(
    out: Any, codes: Any, h: int, s: Any, c: Any, mode: int, sp: int, cp: int, scale: float
) -> None:
    # In bounds: the codes _rotate_rows left (rows of this out, j < h, cosines only j < cc),
    # and s, c hold one value per code.
    for k in range(codes.shape[0]):
        r, column = divmod(codes[k], 2 * h)
        is_cos = column % 2
        _store_one(out, r, column // 2, is_cos, c[k] if is_cos else s[k], h, mode, sp, cp, scale)


class _Exact:
    """Buffers for exact sines and cosines, a block at a time: ``size`` values at most.

    The loops write ``rows·h`` (grid) or ``len(codes)`` (codes) values into five rows of one
    allocation without checking an index, so :meth:`_room` refuses more than ``size`` first:
    one value too many is a write past the end of the heap block, which corrupts the allocator
    and kills the process later, anywhere (the crash of issue 20, from :func:`rotated_table`).
    """

    def __init__(self, turns: Turns, size: int) -> None:
        self.turns = turns
        self.size = size
        self.a_hi, self.a_lo, self.q, self.s, self.c = np.empty((5, size))

    def _room(self, count: int) -> None:
        if count > self.size:
            raise IndexError(f"{count} exact values do not fit a buffer of {self.size}")

    def finish(self, count: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        a_hi, s, c = self.a_hi[:count], self.s[:count], self.c[:count]
        np.sin(a_hi, out=s)
        np.cos(a_hi, out=c)
        _unfold(s, c, self.a_lo, self.q, count)
        return s, c

    def grid(
        self, first: int, rows: int, step: int = 1
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Rows of positions ``first + step·i``, flat: ``(rows · h,)`` each."""
        t = self.turns
        self._room(rows * len(t))
        _reduce_grid(
            float(first),
            float(step),
            rows,
            t.hi,
            t.lo,
            t.hi_a,
            t.hi_b,
            self.a_hi,
            self.a_lo,
            self.q,
        )
        return self.finish(rows * len(t))

    def codes(
        self, offset: int, codes: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        t = self.turns
        self._room(len(codes))
        _reduce_codes(
            float(offset), codes, len(t), t.hi, t.lo, t.hi_a, t.hi_b, self.a_hi, self.a_lo, self.q
        )
        return self.finish(len(codes))


def _small_slots(h: int) -> int:
    """Codes of values near zero one call of :func:`_rotate_rows` may leave: room for two rows
    at least, so that every call makes progress."""
    return max(_SMALL_SLOTS, 4 * h)


def _store_args(out: npt.NDArray[Any], h: int, store: Store) -> tuple[int, int, int, int, float]:
    """The store's arguments for the loops, once ``out`` is proved to be exactly what they
    write: every plane, row and column, and nothing past them. The loops index ``out`` with
    the store's planes and with columns up to ``2h`` unchecked, so a mismatch would write
    outside the array (and one short of it would send uninitialised memory to a client)."""
    if store.mode in (SIN_COS_INTERLEAVED, SIN_COS_SPLIT):
        planes = {0}
        columns = max(2 * h - 1, 2 * store.cosines) if store.mode == SIN_COS_INTERLEAVED else h
        columns += store.cosines if store.mode == SIN_COS_SPLIT else 0
    else:
        planes = {store.sin_plane, store.cos_plane} - {-1}
        columns = 2 * h
        if store.cosines != h:
            raise ValueError("a rotary table has a cosine for every frequency")
    if (
        out.ndim != 3
        or not 0 <= store.cosines <= h
        or planes != set(range(out.shape[0]))
        or out.shape[2] != columns
    ):
        raise ValueError(f"an output of shape {out.shape} does not match {store} with h={h}")
    return store.mode, store.cosines, store.sin_plane, store.cos_plane, store.scale


# Bounded small: the twiddles of a d_model of 65536 take 8 MB.
@lru_cache(maxsize=4)
def _twiddles(turns: Turns, stride: int) -> npt.NDArray[np.float64]:
    """``rotation._conjugate_twiddles`` as real and imaginary parts ``(2, BLOCK, h)``, each
    contiguous so that the loops run in SIMD registers; computed block by block."""
    exact = _Exact(turns, max(EXACT_BLOCK, len(turns)))
    twiddles = np.empty((2, BLOCK, len(turns)))
    for k in range(BLOCK):
        twiddles[1, k], twiddles[0, k] = exact.grid(k * stride, 1)
    twiddles[1] *= -1.0
    twiddles.flags.writeable = False
    return twiddles


Finished = Callable[[npt.NDArray[Any], int], None]
"""Told ``(out, rows)`` once rows ``[0, rows)`` of every plane of ``out`` are final."""


def _in_threads(
    rows: int, threads: int, part: Any, out: npt.NDArray[Any], finished: Finished | None
) -> None:
    """``part(first, stop, done)`` over ``rows`` split at multiples of BLOCK² into ``threads``
    ranges, each thread with a copy of the caller's context (so :func:`checkpoint` sees its
    token); a part calls ``done(row)`` once its rows before ``row`` are final, and ``finished``
    hears of the rows final from the first on.

    Threads share ``out`` only: each writes its own rows, and every other buffer (twiddles,
    frequencies) is read-only. All have stopped when this returns or raises (the executor's
    exit waits for them even when one failed or was cancelled), so no loop writes into an
    output its caller has already dropped or handed on."""
    threads = max(1, min(threads, -(-rows // _SPAN)))
    if threads == 1:
        part(0, rows, (lambda row: finished(out, row)) if finished else _nobody)
        return
    step = -(-rows // (threads * _SPAN)) * _SPAN
    bounds = [(first, min(first + step, rows)) for first in range(0, rows, step)]
    reached = [first for first, _ in bounds]
    lock = threading.Lock()

    def done(index: int, row: int) -> None:
        # The rows final from the first on end at the first part that has not finished; told
        # under the lock, so that what ``finished`` hears only grows.
        with lock:
            reached[index] = row
            prefix = next(
                (r for r, (_, stop) in zip(reached, bounds, strict=True) if r < stop), rows
            )
            if finished:
                finished(out, prefix)

    with ThreadPoolExecutor(len(bounds)) as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, part, first, stop, partial(done, index))
            for index, (first, stop) in enumerate(bounds)
        ]
        for future in futures:
            future.result()


def _nobody(row: int) -> None:
    pass


def rotated_table(
    out: npt.NDArray[Any],
    offset: int,
    turns: Turns,
    store: Store,
    threads: int = 1,
    finished: Finished | None = None,
    in_place: bool = False,
) -> None:
    """Fill ``out`` (planes, rows, columns) with positions ``offset …`` by rotation, exactly as
    :func:`posenc.numerics.rotation.fill_consecutive` would (values below SMALL recomputed
    exactly). A row's values do not depend on where a call starts, so ``finished`` can be told
    of rows in smaller calls at no cost to the bits."""
    rows, h = out.shape[1], len(turns)
    fine, coarse = _twiddles(turns, 1), _twiddles(turns, BLOCK)
    args = _store_args(out, h, store)
    per_call = max(1, (_REPORTED_CALL if finished else _ROTATION_CALL) // (2 * h))
    # _rotate_rows stops a call before a row once fewer than 2h slots are left and a row adds
    # at most h + cosines ≤ 2h codes, so a call leaves at most len(small) codes; the exact
    # buffer recomputes all of them at once and so has exactly as many slots. (It had 2h: a
    # table wider than 4096 with enough values near zero — d_model=8192, base=1e9, three rows —
    # wrote up to 2h values past its end.)
    slots = _small_slots(h)

    def part(first: int, stop: int, done: Callable[[int], None]) -> None:
        exact = _Exact(turns, slots)
        supers = np.empty((2, -(-(stop - first) // _SPAN), h))
        per_block = max(1, EXACT_BLOCK // h)
        for i in range(0, supers.shape[1], per_block):
            count = min(per_block, supers.shape[1] - i)
            s, c = exact.grid(offset + first + i * _SPAN, count, _SPAN)
            supers[0, i : i + count] = s.reshape(count, h)
            supers[1, i : i + count] = c.reshape(count, h)
        small = np.empty(slots, dtype=np.int64)
        row_s, row_c, anchor_r, anchor_i = np.empty((4, h))
        r = first
        while r < stop:
            checkpoint()
            end = min(stop, r + per_call)
            if finished and not in_place:  # its pages come as written: bring this call's at once
                for plane in out:
                    fault_in(plane[r:end])
            # The supers of this part start at its first row: shift the rows by it.
            view = out[:, first:]
            finished_rows, count = _rotate_rows(
                view, r - first, end - first, supers, coarse, fine, *args,
                small, row_s, row_c, anchor_r, anchor_i,
            )  # fmt: skip
            if count:
                codes = small[:count]
                s, c = exact.codes(offset + first, codes)
                _store_codes(view, codes, h, s, c, args[0], args[2], args[3], args[4])
            r = finished_rows + first
            done(r)

    _in_threads(rows, threads, part, out, finished)


def exact_table(
    out: npt.NDArray[Any],
    offset: int,
    turns: Turns,
    store: Store,
    threads: int = 1,
    finished: Finished | None = None,
    in_place: bool = False,
) -> None:
    """Fill ``out`` with positions ``offset …`` on the exact path, block by block: the values
    of :func:`posenc.numerics.exact.sincos`, bit for bit. ``in_place`` is :func:`rotated_table`'s,
    so that a table calls either alike: these loops take new pages one fault at a time as they
    write, in place or not."""
    rows, h = out.shape[1], len(turns)
    args = _store_args(out, h, store)
    per_block = max(1, EXACT_BLOCK // h)

    def part(first: int, stop: int, done: Callable[[int], None]) -> None:
        exact = _Exact(turns, max(EXACT_BLOCK, h))
        calls = 0
        for r in range(first, stop, per_block):
            if calls % 64 == 0:
                checkpoint()
            if calls % 8 == 0 and r > first:
                done(r)
            calls += 1
            count = min(per_block, stop - r)
            s, c = exact.grid(offset + r, count)
            _store_rows(out, r, count, h, s, c, *args)
        done(stop)

    _in_threads(rows, threads, part, out, finished)


# Calibrated here (bench/run.py prints measured seconds against these): work units per value
# written, per pair computed exactly, per row of Python and loop overhead, and per call.
_WORK_PER_VALUE = 3
_WORK_PER_EXACT_PAIR = 30
_WORK_PER_ROW = 400
_WORK_PER_CALL = 100_000
_WORK_PER_LOOP_CALL = 50_000  # a compiled loop's call from Python, its arguments and views


def rotated_cost(rows: int, h: int, values: int, threads: int = 1) -> Cost:
    """Working memory besides the output, and work, of :func:`rotated_table`."""
    part_rows = -(-rows // max(1, threads))
    supers = -(-part_rows // _SPAN)
    per_thread = 8 * (6 * _small_slots(h) + 4 * h + 2 * supers * h)
    twiddles = 8 * (2 * 2 * BLOCK * h + 5 * max(EXACT_BLOCK, h))
    # As many loop calls as when rows are reported (the most): a response may listen.
    calls = -(-rows // max(1, _REPORTED_CALL // (2 * h)))
    work = (
        _WORK_PER_VALUE * values
        + _WORK_PER_ROW * rows
        + _WORK_PER_EXACT_PAIR * (-(-rows // _SPAN) + 2 * BLOCK) * h
        + _WORK_PER_CALL * threads
        + _WORK_PER_LOOP_CALL * calls
    )
    return Cost(twiddles + max(1, threads) * per_thread, work)


def exact_cost(rows: int, h: int, values: int, threads: int = 1) -> Cost:
    """Working memory besides the output, and work, of :func:`exact_table`."""
    work = (
        _WORK_PER_VALUE * values
        + _WORK_PER_ROW * rows
        + _WORK_PER_EXACT_PAIR * rows * h
        + _WORK_PER_CALL * threads
    )
    return Cost(max(1, threads) * 8 * 5 * max(EXACT_BLOCK, h), work)
