"""Which position id turns each pair, in a GGUF file's M-RoPE and in its model's: the findings
of :func:`.conformance.check` for multimodal ropes.

llama.cpp's ``ggml_mrope_cache_init`` (ggml-cpu's ops.cpp) gives each pair one of four ids: the
temporal, height and width ids by the file's ``rope.dimension_sections``, chunked (MROPE) or
interleaved (IMROPE), and every other pair the fourth. For a text prompt decoded from tokens,
llama.cpp sets the first three ids to the position and the fourth to 0
(``llm_graph_input_pos::set_input``): a pair the fourth id turns does not turn at all, where
transformers turns it by the temporal id, the position. With Qwen3-VL's sections [24, 20, 20]
those are pairs 61 and 62 of 64.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.models.verdict import Found
from posenc.schemes.rope.mrope.tables import frequency_rows
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.scaling import frequencies

_AXES = ("temporal", "height", "width", "fourth")
_COMPARABLE = ("chunked", "interleaved")  # the rules llama.cpp has a mode for

# A finding of the GGUF check: its kind, its detail and its evidence.


def ggml_axes(sections: tuple[int, ...], half: int, interleaved: bool) -> npt.NDArray[np.intp]:
    """The id (0 temporal, 1 height, 2 width, 3 the fourth) ggml turns each of ``half`` pairs
    by, as ``ggml_mrope_cache_init`` decides it."""
    t, h, w = sections[:3]
    sector = np.arange(half) % max(1, sum(sections))
    axes = np.full(half, 3, np.intp)
    if interleaved:
        axes[(sector % 3 == 0) & (sector < 3 * t)] = 0
        axes[(sector % 3 == 2) & (sector < 3 * w)] = 2
        axes[(sector % 3 == 1) & (sector < 3 * h)] = 1
        return axes
    axes[sector < t + h + w] = 2
    axes[sector < t + h] = 1
    axes[sector < t] = 0
    return axes


def findings(
    model_mrope: Mapping[str, Any] | None,
    params: RopeParams,
    sections: tuple[int, ...] | None,
    rope_type: str,
    n_dims: int,
    n_ctx: int,
) -> list[Found]:
    """What differs between the model's M-RoPE (its answer's ``mrope``, turning ``params``) and
    the file's (its ``sections``, ``rope_type`` ``mrope`` or ``imrope``, over ``n_dims``) at
    ``n_ctx``; pairs are compared where the two turn as many."""
    if model_mrope is None:
        if sections is None:
            return []
        detail = (
            f"llama.cpp turns the file's sections {list(sections)} by separate position "
            "ids; the model turns every pair by the one position"
        )
        evidence = {"file_sections": list(sections), "rope_type": rope_type}
        return [("mrope_added", detail, evidence)]
    if sections is None:
        detail = (
            "the model turns its pairs by temporal, height and width ids (M-RoPE); llama.cpp "
            f"turns them all by one position ({rope_type.upper()}): image and video tokens turn "
            "otherwise"
        )
        evidence = {"model_section": list(model_mrope["section"]), "rope_type": rope_type}
        return [("mrope_dropped", detail, evidence)]
    rotary = model_mrope["rotary"]
    if rotary not in _COMPARABLE or params.d_model != n_dims:
        return []
    half = params.d_model // 2
    ours = frequency_rows(rotary, tuple(model_mrope["section"]), half)
    theirs = ggml_axes(sections, half, rope_type == "imrope")
    found: list[Found] = []
    fourth = np.flatnonzero((theirs == 3) & (ours == 0))
    if fourth.size:
        found.append(_fourth_id(params, fourth, n_ctx))
    other = np.flatnonzero((theirs != ours) & ~((theirs == 3) & (ours == 0)))
    if other.size:
        detail = (
            f"{other.size} pairs turn by another id: the model's {rotary} sections "
            f"{list(model_mrope['section'])}, the file's {rope_type.upper()} sections "
            f"{list(sections)}"
        )
        evidence = {
            "pairs": other[:16].tolist(),
            "model_ids": [_AXES[a] for a in ours[other[:16]]],
            "file_ids": [_AXES[a] for a in theirs[other[:16]]],
        }
        found.append(("mrope_sections", detail, evidence))
    return found


def _fourth_id(params: RopeParams, pairs: npt.NDArray[np.intp], n_ctx: int) -> Found:
    """Pairs llama.cpp turns by the fourth id (0 for a text token) and the model by the
    temporal one: the angle they fall behind by at the last position of ``n_ctx``."""
    turns, _ = frequencies(params, n_ctx)
    last = n_ctx - 1
    angles = [float(last * radians) for radians in np.asarray(turns.radians, np.float64)[pairs]]
    behind = max(angles)
    detail = (
        f"llama.cpp turns pairs {pairs.tolist()} by a fourth position id, which it sets to 0 "
        "for a text prompt's tokens: they do not turn, where the model turns them by the "
        f"temporal id (by up to {behind:.3g} rad at position {last}, the last of n_ctx)"
    )
    evidence = {
        "pairs": pairs.tolist(),
        "fourth_id_of_text": 0,
        "position": last,
        # each pair's angle at that position in the model, which llama.cpp's stays 0 short of
        "radians_per_pair": angles,
        "radians_behind": behind,
    }
    return "mrope_fourth_id", detail, evidence
