"""The cos and sin a kernel applied, recovered: where its tokens hold a run of consecutive
positions, the rotations of the run are a rope cache at those positions, and what is wrong with
its frequencies and its first position is what the cache conformance reads off any cache
(:mod:`posenc.schemes.rope.conformance`: the frequencies, then the fitted base or scaling,
then the first row's position) — one diagnosis, not a second one.

A cell's rotation is recovered as ``(Σ x·y, Σ x×y) / Σ|x|²`` over its samples: the cos and
sin that turn every sample, times the magnitude, exactly where the kernel rotated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.schemes.rope.applied import loops
from posenc.schemes.rope.conformance.offset import fit_offset
from posenc.schemes.rope.conformance.reading import read
from posenc.schemes.rope.conformance.rows import Model
from posenc.schemes.rope.conformance.spectrum import fit_spectrum
from posenc.schemes.rope.maths import expand
from posenc.schemes.rope.params import RopeParams

# A run shorter than this gives no frequency to trust.
SHORTEST_RUN = 4


@dataclass(frozen=True)
class Fitted:
    """What the recovered cache fits: the parameters, the shift of its positions, and the
    cache conformance's findings for the parameters."""

    params: RopeParams
    shift: int
    findings: list[Finding]


def run_of(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.intp] | None:
    """The tokens of the longest run of consecutive positions (each position once), in
    position order: where every row of M-RoPE's ids agree, the text tokens."""
    if len(ids) > 1 and not (ids == ids[:1]).all():
        return None
    positions = ids[0]
    order = np.argsort(positions, kind="stable")
    sorted_positions = positions[order]
    unique = np.concatenate([[True], np.diff(sorted_positions) != 0])
    order, sorted_positions = order[unique], sorted_positions[unique]
    breaks = np.flatnonzero(np.diff(sorted_positions) != 1) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [len(order)]])
    longest = int(np.argmax(ends - starts))
    if ends[longest] - starts[longest] < SHORTEST_RUN:
        return None
    chosen: npt.NDArray[np.intp] = order[starts[longest] : ends[longest]]
    return chosen


def recovered(
    stats: npt.NDArray[np.float64], tokens: npt.NDArray[np.intp]
) -> npt.NDArray[np.float64]:
    """The rotation of each cell of ``tokens``: cos then sin, ``(2, len(tokens), h)``."""
    xx = stats[loops.XX][tokens]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.stack([stats[loops.DOT][tokens] / xx, stats[loops.CROSS][tokens] / xx])


def fit(
    params: RopeParams, stats: npt.NDArray[np.float64], ids: npt.NDArray[np.int64], head: int
) -> Fitted | None:
    """The rope the recovered cache of the longest run fits (None: no run, or a cell of it
    unread), read and fitted as the cache conformance reads and fits a client's cache. A
    wider head than the arrays' ``head`` is no reading of them: that fit is another base."""
    tokens = run_of(ids)
    if tokens is None:
        return None
    rotation = recovered(stats, tokens)
    if not np.isfinite(rotation).all():
        return None
    first = int(ids[0][tokens[0]])
    cache = np.stack([expand(rotation[0], params.layout), expand(rotation[1], params.layout)])
    frame = Model(replace(params, recipe="exact"), first)
    reading = read(frame, cache, "cos_sin", len(tokens))
    model, findings = fit_spectrum(frame, reading, len(tokens))
    model, _ = fit_offset(model, reading, "cos_sin", len(tokens))
    return Fitted(model.params, model.offset - first, [_within(f, params, head) for f in findings])


def _within(finding: Finding, stated: RopeParams, head: int) -> Finding:
    """A ``partial_rotary`` of a head wider than the arrays' is the other reading of the same
    frequencies, ``base_mismatch`` (10^6 over 384 dims is 10^4 over 256)."""
    evidence = finding.evidence
    if finding.name != "partial_rotary" or evidence.get("head_dim", 0) <= head:
        return finding
    fitted = evidence["fitted_base"]
    where: dict[str, Any] = {k: evidence[k] for k in ("pairs_read", "pairs_count") if k in evidence}
    return Finding(
        "base_mismatch",
        f"the frequencies fit base {fitted:g}, not the stated {stated.base:g}",
        {"fitted_base": fitted, "stated_base": stated.base, **where},
    )
