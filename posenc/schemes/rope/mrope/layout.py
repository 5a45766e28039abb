"""A sequence's layout (text runs, images, videos) → the runs of tokens ``get_rope_index`` sees.

A segment is ``{"text": n}`` (n text tokens: wrappers such as vision_start and timestamps are
text, written by the caller), ``{"image": [t, h, w]}`` (the image's placeholder tokens, its patch
grid before the spatial merge, as ``image_grid_thw`` holds it) or ``{"video": [t, h, w],
"second_per_grid_t": s}``. Where a family gives each frame its own grid, a video is its frames,
each between ``frame_prefix`` and ``frame_suffix`` text tokens (default 1 and 1: the vision
start and end tokens the processor writes around each frame; a caller adds its timestamp tokens
to them). Everything is counted here from the numbers alone, before anything is allocated.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from posenc.errors import InconsistentError, LimitError, ParameterError
from posenc.schemes.rope.mrope.families import MRopeFamily

# Ids stay int32-sized, as every id of a real sequence is; a layout past it is refused.
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class Vision:
    """Where a family's vision blocks come from: its config's merge sizes and time spacing."""

    family: MRopeFamily
    spatial_merge_size: int
    temporal_merge_size: int = 1
    tokens_per_second: float | None = None
    position_id_per_seconds: float | None = None


@dataclass(frozen=True)
class Run:
    """Consecutive tokens of one kind: ``count`` text tokens, or ``frames`` vision blocks of a
    ``(t, h, w)`` merged grid each, every block between ``prefix`` and ``suffix`` text tokens
    (a video split into frames; a single block otherwise)."""

    kind: Literal["text", "image", "video"]
    segment: int
    count: int = 0
    grid: tuple[int, int, int] = (0, 0, 0)
    frames: int = 1
    prefix: int = 0
    suffix: int = 0
    # Frame i's temporal id is int(float32(float32(i · a) · b)) for clock (a, b); None: i.
    clock: tuple[float, float] | None = None
    merge: int = 1  # the spatial merge that made ``grid`` of the patch grid
    seconds: float = 1.0  # a video's second_per_grid_t

    @property
    def tokens(self) -> int:
        if self.kind == "text":
            return self.count
        t, h, w = self.grid
        return self.frames * (self.prefix + t * h * w + self.suffix)

    @property
    def advance(self) -> int:
        """How far the ids of what follows start after this run's first id."""
        if self.kind == "text":
            return self.count
        return self.frames * (self.prefix + max(self.grid[1:]) + self.suffix)


def runs_of(segments: Sequence[Mapping[str, Any]], vision: Vision, where: str) -> list[Run]:
    runs = [
        _run(segment, index, vision, f"{where}[{index}]") for index, segment in enumerate(segments)
    ]
    if not runs:
        raise ParameterError(where, "must hold at least one segment")
    _no_merged_runs(runs, where)
    if vision.family.markers:
        _marked(runs, where)
    return runs


def check_size(runs: Sequence[Run], max_values: int, where: str) -> int:
    """The sequence's token count, refused when its ids would not fit the limits."""
    tokens = sum(run.tokens for run in runs)
    if 3 * tokens > max_values:
        raise LimitError(
            where, f"{tokens} tokens give {3 * tokens} ids, over the limit of {max_values}"
        )
    # Each run's ids span at most its advance or its temporal reach, whichever is larger,
    # under either resume rule (at the grid, or at the largest id + 1).
    highest = sum(max(run.advance, _temporal_reach(run)) for run in runs)
    if highest > MAX_ID:
        raise LimitError(where, f"the ids would reach {highest}, past 2^31 - 1")
    return tokens


def _temporal_reach(run: Run) -> int:
    if run.kind == "text" or run.clock is None:
        return 0
    return frame_time(run.grid[0] - 1, run.clock) + 1


def frame_time(frame: int, clock: tuple[float, float]) -> int:
    """Frame ``frame``'s temporal id, as torch computes it: float32 products, truncated."""
    a, b = np.float32(clock[0]), np.float32(clock[1])
    return int(np.float32(np.float32(frame) * a) * b)


def _run(segment: Mapping[str, Any], index: int, vision: Vision, where: str) -> Run:
    if "text" in segment:
        return Run("text", index, count=int(segment["text"]))
    kind: Literal["image", "video"] = "image" if "image" in segment else "video"
    t, h, w = (int(v) for v in segment[kind])
    m = vision.spatial_merge_size
    if h % m or w % m:
        raise InconsistentError(
            f"{where}.{kind}", f"h and w must be multiples of spatial_merge_size {m}, got {h}, {w}"
        )
    family = vision.family
    framed = kind == "video" and family.video == "per_frame"
    for key in ("frame_prefix", "frame_suffix"):
        if key in segment and not framed:
            raise InconsistentError(
                f"{where}.{key}",
                "applies only to families that give each video frame its own grid",
            )
    if kind == "image":
        clock = None
        if family.video_time == "seconds":  # Omni scales an image's frames by the rate too
            clock = (1.0, vision.position_id_per_seconds or 1.0)
        return Run("image", index, grid=(t, h // m, w // m), merge=m, clock=clock)
    if family.video == "none":
        raise InconsistentError(f"{where}.video", "this model type has no video input")
    if framed:
        return _framed_video(segment, index, (t, h // m, w // m), m, where)
    return _block_video(segment, index, vision, (t, h // m, w // m), where)


def _framed_video(
    segment: Mapping[str, Any], index: int, grid: tuple[int, int, int], m: int, where: str
) -> Run:
    """A video whose every frame is its own ``[1, h, w]`` grid between text tokens."""
    prefix, suffix = int(segment.get("frame_prefix", 1)), int(segment.get("frame_suffix", 1))
    t, h, w = grid
    if t > 1 and prefix + suffix == 0:
        raise InconsistentError(
            f"{where}.frame_prefix",
            "with no text between a video's frames, transformers reads them as one run of "
            "one frame's grid and fails: the processor writes vision start and end tokens "
            "around each frame",
        )
    return Run("video", index, grid=(1, h, w), frames=t, prefix=prefix, suffix=suffix, merge=m)


def _block_video(
    segment: Mapping[str, Any], index: int, vision: Vision, grid: tuple[int, int, int], where: str
) -> Run:
    """A video as one block: its frames merged in time (ERNIE) and spaced on the family's
    clock."""
    family, (t, h, w) = vision.family, grid
    merge = vision.temporal_merge_size if family.temporal_merge else 1
    if t % merge:
        raise InconsistentError(
            f"{where}.video", f"t must be a multiple of temporal_merge_size {merge}, got {t}"
        )
    seconds = float(segment.get("second_per_grid_t", 1.0))
    clock = None
    if family.video_time == "tokens_per_second":
        clock = (float32_product(vision.tokens_per_second or 1.0, seconds), 1.0)
    elif family.video_time == "seconds":
        clock = (seconds, vision.position_id_per_seconds or 1.0)
    m = vision.spatial_merge_size
    return Run("video", index, grid=(t // merge, h, w), clock=clock, merge=m, seconds=seconds)


def float32_product(a: float, b: float) -> float:
    """``a · b`` as torch computes a Python number times a float32 tensor: both rounded to
    float32, the product rounded to float32."""
    return float(np.float32(a) * np.float32(b))


def _marked(runs: Sequence[Run], where: str) -> None:
    """A family that finds its media by their start and end tokens needs them: a text token of
    its own on each side of every image or video."""
    for index, run in enumerate(runs):
        if run.kind == "text":
            continue
        before = runs[index - 1] if index else None
        after = runs[index + 1] if index + 1 < len(runs) else None
        shared = index >= 2 and runs[index - 2].kind != "text" and before is not None
        if before is None or before.kind != "text" or (shared and before.count < 2):
            raise InconsistentError(
                f"{where}[{run.segment}]",
                "needs its start token: a text token of its own before it",
            )
        if after is None or after.kind != "text":
            raise InconsistentError(
                f"{where}[{run.segment}]", "needs its end token: a text token after it"
            )


def _no_merged_runs(runs: Sequence[Run], where: str) -> None:
    """transformers groups consecutive tokens of one modality into one run and gives it the next
    grid: two vision runs of one kind with no text between them would be read as one."""
    for before, after in itertools.pairwise(runs):
        if before.kind == "text" or before.kind != after.kind:
            continue
        if before.suffix == 0 and after.prefix == 0:
            raise InconsistentError(
                f"{where}[{after.segment}]",
                f"follows another {after.kind} with no text between them: transformers reads "
                "the two as one run (the processor writes vision start and end tokens around "
                "each)",
            )
