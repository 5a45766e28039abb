"""What transformers' own rotary module says a built model's caches must hold, and which pairs
its attention turns: the suite's truth for the builder's outputs, independent of the service.

The rotary module's forward for positions ``0 … n−1`` gives cos and sin (float32, each pair's
value twice); LongRoPE's module picks its long factors once ``max(position_ids) + 1`` passes
``original_max_position_embeddings``, so its short table is the forward over that many
positions and its long one over the whole context. The pairs are read from the family's own
``apply_rotary_pos_emb`` turning each basis vector: the dimension that moves with dimension 0
is 1 for interleaved pairs, half the rotary width for rotate_half.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Table = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]


@dataclass(frozen=True)
class Truth:
    pairs: str  # "split" or "interleaved"
    short: Table | None  # LongRoPE's table up to original_max_position_embeddings
    long: Table  # the table over the whole context
    original: int | None


def of(hf: Path) -> Truth:
    import torch
    from transformers import AutoModelForCausalLM

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        model = AutoModelForCausalLM.from_pretrained(hf)
    config = model.config
    rotary = model.model.rotary_emb
    takes_type = "layer_type" in inspect.signature(rotary.forward).parameters

    def table(length: int) -> Table:
        positions = torch.arange(length)[None]
        x = torch.zeros(1, length, 4)
        with torch.no_grad():
            cos, sin = (
                rotary(x, positions, layer_type="full_attention")
                if takes_type
                else rotary(x, positions)
            )
        return _pairs_of(cos[0].numpy()), _pairs_of(sin[0].numpy())

    length = config.max_position_embeddings
    longrope = getattr(rotary, "rope_type", "") == "longrope"
    original = config.original_max_position_embeddings if longrope else None
    short = table(original) if original else None
    return Truth(_pairs(model, table(2)), short, table(length), original)


def _pairs_of(table: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """One value per pair: the module's table repeats each (rotate_half's halves), but for a
    family that keeps them once (gpt-oss)."""
    half = table.shape[1] // 2
    if table.shape[1] % 2 == 0 and np.array_equal(table[:, :half], table[:, half:]):
        return table[:, :half]
    return table


def _pairs(model: Any, table: Table) -> str:
    import torch

    module = sys.modules[type(model.model.layers[0].self_attn).__module__]
    # The module's own cos and sin at position 1, as its attention receives them; partial
    # rotary families (Phi, NeoX) call it on the rotating dimensions alone.
    rotary = model.model.rotary_emb
    kwargs = (
        {"layer_type": "full_attention"}
        if "layer_type" in inspect.signature(rotary.forward).parameters
        else {}
    )
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, 1, 4), torch.tensor([[1]]), **kwargs)
    width = 2 * table[0].shape[1]
    q = torch.eye(width).reshape(1, width, 1, width)
    with torch.no_grad():
        turned, _ = module.apply_rotary_pos_emb(q, q, cos, sin)
    moved = turned[0, 0, 0].abs().numpy()
    moved[0] = 0
    partner = int(np.argmax(moved))
    assert partner in (1, width // 2), f"dimension 0 turns with {partner}"
    return "interleaved" if partner == 1 and width > 2 else "split"


def holds(cache: npt.NDArray[np.float64], table: npt.NDArray[np.float32], dtype: str) -> bool:
    """The cache is the table's first rows and pairs, within one ulp of the cache's type."""
    rows, pairs = cache.shape
    if table.shape[0] < rows or table.shape[1] != pairs:
        return False
    kind = np.float16 if dtype == "float16" else np.float32
    mine, theirs = table[:rows, :pairs].astype(kind), cache.astype(kind)
    step = np.spacing(np.maximum(np.abs(mine), np.abs(theirs))).astype(np.float64)
    return bool(np.all(np.abs(mine.astype(np.float64) - theirs.astype(np.float64)) <= step))
