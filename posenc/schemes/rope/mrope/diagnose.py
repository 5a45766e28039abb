"""A client's M-RoPE position ids for a layout, held to the model's own and diagnosed.

Each diagnosis is a fault seen in the wild, rebuilt from the layout and compared with the
client's ids whole: it is named only where the ids are exactly what that fault produces, so a
finding is evidence, not a guess. Text resuming at the block's largest id + 1 (transformers 4,
vLLM), height and width exchanged, frames spaced by the wrong clock, the spatial merge left out,
packed sequences that do not restart, decode steps without the delta, and one row where three
are expected. What none explains is still located: the first token that differs, its segment,
and both ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.conformance import Finding
from posenc.schemes.rope.mrope.families import MRopeFamily
from posenc.schemes.rope.mrope.layout import Run, float32_product
from posenc.schemes.rope.mrope.positions import position_ids, sequence_ids

Ids = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class Expected:
    """The layout's sequences (their runs) and the model's ids for them, decode steps after."""

    family: MRopeFamily
    sequences: Sequence[Sequence[Run]]
    decode_steps: int = 0

    def ids(self) -> tuple[Ids, list[int]]:
        """The model's ids, every sequence restarting at 0 (packed: one after the other), and
        each sequence's delta."""
        parts, deltas = [], []
        for runs in self.sequences:
            checkpoint()
            ids, delta = sequence_ids(runs, self.family)
            parts.append(ids)
            deltas.append(delta)
        if self.decode_steps:
            n = parts[-1].shape[1]
            steps = np.arange(n, n + self.decode_steps, dtype=np.int64) + deltas[-1]
            parts.append(np.broadcast_to(steps, (3, self.decode_steps)))
        return np.concatenate(parts, axis=1), deltas


def diagnose(expected: Expected, given: npt.NDArray[Any]) -> dict[str, Any]:
    wanted, deltas = expected.ids()
    findings: list[Finding] = []
    if given.ndim == 1 or given.shape[0] == 1:
        given = np.broadcast_to(given.reshape(1, -1), (3, given.size))
        one_row = _one_row(wanted)
        if one_row is not None:  # text alone has three equal rows: one row is all of it
            findings.append(one_row)
    if given.shape[1] != wanted.shape[1]:
        findings.extend(_length(expected, wanted, given))
        return _report(wanted, given, expected, findings, equal=False)
    if not np.array_equal(given, wanted):
        for check in (_resume_at_max, _swapped, _clock, _not_restarting, _decode):
            checkpoint()  # each check rebuilds the layout's ids: a client may have gone
            found = check(expected, wanted, given, deltas)
            if found is not None:
                findings.append(found)
    return _report(wanted, given, expected, findings, equal=np.array_equal(given, wanted))


def _report(
    wanted: Ids, given: npt.NDArray[Any], expected: Expected, findings: list[Finding], equal: bool
) -> dict[str, Any]:
    first = None
    if not equal and given.shape == wanted.shape:
        token = int(np.flatnonzero((given != wanted).any(axis=0))[0])
        first = {
            "token": token,
            "segment": _segment_of(expected, token),
            "expected": wanted[:, token].tolist(),
            "got": given[:, token].tolist(),
        }
    mismatched = int((given != wanted).any(axis=0).sum()) if given.shape == wanted.shape else None
    return {
        "equal": equal,
        "tokens": int(wanted.shape[1]),
        "mismatched_tokens": mismatched,
        "first_difference": first,
        "diagnosis": [dataclasses.asdict(finding) for finding in findings],
    }


def _segment_of(expected: Expected, token: int) -> dict[str, int] | None:
    """Which sequence and segment a token belongs to (None: a decode step)."""
    at = 0
    for index, runs in enumerate(expected.sequences):
        for run in runs:
            if token < at + run.tokens:
                return {"sequence": index, "segment": run.segment}
            at += run.tokens
    return None


def _one_row(wanted: Ids) -> Finding | None:
    spread = np.flatnonzero((wanted != wanted[0]).any(axis=0))
    if not spread.size:
        return None
    return Finding(
        "one_dimensional",
        "one row of ids where the model uses three (temporal, height, width): every vision "
        "token turns as if it were text",
        {"first_token_with_distinct_ids": int(spread[0])},
    )


def _length(expected: Expected, wanted: Ids, given: npt.NDArray[Any]) -> list[Finding]:
    unmerged = (
        sum(_unmerged_tokens(run) for runs in expected.sequences for run in runs)
        + expected.decode_steps
    )
    evidence = {"expected_tokens": int(wanted.shape[1]), "given_tokens": int(given.shape[1])}
    if given.shape[1] == unmerged != wanted.shape[1]:
        return [
            Finding(
                "spatial_merge_missing",
                "one id per vision patch: the spatial merge (h/m × w/m tokens per frame) was "
                "not applied",
                evidence,
            )
        ]
    return [Finding("length_mismatch", "not as many tokens as the layout gives", evidence)]


def _unmerged_tokens(run: Run) -> int:
    if run.kind == "text":
        return run.count
    scale = run.merge**2
    t, h, w = run.grid
    return run.frames * (run.prefix + t * h * w * scale + run.suffix)


def _resume_at_max(
    expected: Expected, wanted: Ids, given: npt.NDArray[Any], deltas: list[int]
) -> Finding | None:
    parts = [position_ids(runs, resume_at_max=True)[0] for runs in expected.sequences]
    if expected.decode_steps or not np.array_equal(given, np.concatenate(parts, axis=1)):
        return None
    token = _first(wanted, given)
    return Finding(
        "text_resumes_at_max_plus_one",
        "what follows a vision block starts at the block's largest id + 1 (transformers 4, "
        "vLLM), not at its start + max(h, w)/m as transformers 5's get_rope_index does",
        {"token": token, "segment": _segment_of(expected, token)},
    )


def _vision_mask(expected: Expected, total: int) -> npt.NDArray[np.bool_]:
    """Which tokens are vision placeholders (not text, not a frame's text, not decode steps)."""
    mask = np.zeros(total, bool)
    at = 0
    for runs in expected.sequences:
        for run in runs:
            if run.kind != "text":
                t, h, w = run.grid
                frame = np.zeros(run.prefix + t * h * w + run.suffix, bool)
                frame[run.prefix : run.prefix + t * h * w] = True
                mask[at : at + run.tokens] = np.tile(frame, run.frames)
            at += run.tokens
    return mask


def _swapped(
    expected: Expected, wanted: Ids, given: npt.NDArray[Any], deltas: list[int]
) -> Finding | None:
    vision = _vision_mask(expected, wanted.shape[1])
    exchanged = wanted.copy()
    exchanged[1, vision], exchanged[2, vision] = wanted[2, vision], wanted[1, vision]
    if not np.array_equal(given, exchanged):
        return None
    token = _first(wanted, given)
    return Finding(
        "height_width_swapped",
        "the height and width ids are exchanged in the vision blocks (rows 1 and 2)",
        {"token": token, "segment": _segment_of(expected, token)},
    )


def _clock(
    expected: Expected, wanted: Ids, given: npt.NDArray[Any], deltas: list[int]
) -> Finding | None:
    """Only videos' temporal ids differ: find the frame spacing that gives the client's."""
    if not np.array_equal(given[1:], wanted[1:]):
        return None
    videos = [
        (index, run)
        for index, runs in enumerate(expected.sequences)
        for run in runs
        if run.kind == "video"
    ]
    for clock, respace in _CLOCKS:
        sequences = [
            [respace(run) if run.kind == "video" else run for run in runs]
            for runs in expected.sequences
        ]
        respaced = Expected(expected.family, sequences, expected.decode_steps)
        if np.array_equal(given, respaced.ids()[0]):
            token = _first(wanted, given)
            return Finding(
                "temporal_spacing",
                f"the videos' frames are spaced by {clock} (the model: {_spacing_of(videos)})",
                {"token": token, "segment": _segment_of(expected, token), "fits": clock},
            )
    token = _first(wanted, given)
    return Finding(
        "temporal_spacing",
        "only the videos' temporal ids differ, by a spacing none of the usual clocks gives",
        {"token": token, "segment": _segment_of(expected, token), "fits": None},
    )


def _spaced(rate: float) -> Callable[[Run], Run]:
    return lambda run: dataclasses.replace(run, clock=(float32_product(rate, run.seconds), 1.0))


# Clocks a port may have used for a video's frames: the frame index, or a rate of ids a second.
_CLOCKS: tuple[tuple[str, Callable[[Run], Run]], ...] = (
    ("the frame index", lambda run: dataclasses.replace(run, clock=None)),
    *((f"{rate:g} ids a second", _spaced(rate)) for rate in (1.0, 2.0, 4.0, 8.0, 25.0, 50.0)),
)


def _spacing_of(videos: list[tuple[int, Run]]) -> str:
    clocks = {run.clock for _, run in videos}
    if clocks == {None}:
        return "one id per frame"
    steps = sorted({float(np.float32(c[0]) * np.float32(c[1])) for c in clocks if c})
    return "frames " + ", ".join(f"{step:g}" for step in steps) + " apart"


def _not_restarting(
    expected: Expected, wanted: Ids, given: npt.NDArray[Any], deltas: list[int]
) -> Finding | None:
    if len(expected.sequences) < 2:
        return None
    at, shifts = 0, []
    for runs in expected.sequences:
        tokens = sum(run.tokens for run in runs)
        shift = given[:, at : at + tokens] - wanted[:, at : at + tokens]
        if (shift != shift.flat[0]).any():
            return None
        shifts.append(int(shift.flat[0]))
        at += tokens
    if not any(shifts):
        return None
    sequence = next(index for index, shift in enumerate(shifts) if shift)
    return Finding(
        "packed_not_restarting",
        "the ids of packed sequences continue from the one before instead of restarting at 0",
        {"sequence": sequence, "shifts": shifts},
    )


def _decode(
    expected: Expected, wanted: Ids, given: npt.NDArray[Any], deltas: list[int]
) -> Finding | None:
    steps = expected.decode_steps
    if not steps or not np.array_equal(given[:, :-steps], wanted[:, :-steps]):
        return None
    shift = given[:, -steps:] - wanted[:, -steps:]
    if (shift != -deltas[-1]).any() or deltas[-1] == 0:
        return None
    return Finding(
        "decode_delta_missing",
        "the decode steps continue at the prompt's length, without next_position_delta",
        {"token": int(wanted.shape[1] - steps), "delta": deltas[-1]},
    )


def _first(wanted: Ids, given: npt.NDArray[Any]) -> int:
    return int(np.flatnonzero((given != wanted).any(axis=0))[0])
