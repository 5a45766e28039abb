"""What llama.cpp applies at each layer of a GGUF file: its header (:mod:`.reader`) under its
architecture's row (:mod:`.arches`), for the context ``n_ctx`` llama.cpp runs with.

Each layer's rope is the call its graph makes, ``ggml_rope_ext(x, pos, factors, n_dims, mode,
n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)``, with the
values llama.cpp computes in float32 (:mod:`.scalars`): ``freq_scale = 1/rope.scaling.factor``;
``ext_factor`` 1 for YaRN, else 0; the attention factor ``llama_context`` derives for YaRN.
Where each argument comes from is the row's :class:`~.arches.Form` for that layer (full,
sliding or compressed); which layers rotate, and what else turns in them, is
:mod:`.layers`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from posenc.schemes.rope.gguf.arches import ARCHES, LLAMA_CPP_VERSION, Arch, Form, RopeType
from posenc.schemes.rope.gguf.layers import Layout, layout
from posenc.schemes.rope.gguf.reader import GGUFError, Header
from posenc.schemes.rope.gguf.scalars import Context, context
from posenc.schemes.rope.gguf.values import Keys
from posenc.schemes.rope.recipes.llama_cpp import RopeCall

_MULTI = ("mrope", "imrope", "vision")


MAX_LAYERS = 4096


@dataclass(frozen=True)
class Call(RopeCall):
    """One layer's ``ggml_rope_ext`` (or ``ggml_rope_multi``) call as a GGUF file makes
    llama.cpp pass it; ``factors`` is the name of its factor tensor, or None (the tensor's
    values stay in the file's header until a check reads them)."""

    factors: str | None = None

    def ggml(self) -> dict[str, Any]:
        return {
            "n_dims": self.n_dims,
            "mode": self.mode,
            "n_ctx_orig": self.n_ctx_orig,
            "freq_base": self.freq_base,
            "freq_scale": self.freq_scale,
            "ext_factor": self.ext_factor,
            "attn_factor": self.attn_factor,
            "beta_fast": self.beta_fast,
            "beta_slow": self.beta_slow,
            "sections": None if self.sections is None else list(self.sections),
            "freq_factors": self.factors,
        }


@dataclass(frozen=True)
class Turn:
    """A call and what it turns, in one layer."""

    call: Call
    applies_to: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class Read:
    """Every layer's calls, grouped by layer, with what they were read from."""

    row: Arch
    n_layer: int
    n_layer_all: int
    n_ctx: int
    n_ctx_train: int
    head_dim: int
    # The attention rope of each layer (None: the layer does not rotate), and its other ropes.
    per_layer: list[Call | None]
    applies: list[tuple[str, ...]]
    extras: list[list[Turn]]
    # The layers each unstated rope turns, with why it is not a ggml_rope_ext call.
    unstated: list[tuple[list[int], tuple[str, ...], str]]
    sliding: list[bool]
    padded_n_ctx: int
    # DeepSeek's yarn_log_multiplier as (mscale, mscale_all_dim), or None.
    mscales: tuple[float, float] | None
    keys: list[str]
    factors: tuple[str, ...]
    # Layers past num_hidden_layers (nextn_predict_layers) the decoder never runs.
    mtp_layers: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def row_of(header: Header) -> Arch:
    arch = header.architecture
    if arch not in ARCHES:
        raise GGUFError(
            f"architecture {arch!r} has no row in the table read from llama.cpp "
            f"{LLAMA_CPP_VERSION[:9]}: llama.cpp gives it no rope (answered: every "
            f"architecture llama_model_rope_type ropes, {len(ARCHES)})"
        )
    return ARCHES[arch]


def _call(row: Arch, ctx: Context, form: Form, il: int, sliding: bool, full: bool) -> Call:
    """The call a layer of this form gets (``full``: the layer may get the factor tensor)."""
    dims = {"n_rot": ctx.n_rot, "layer": ctx.n_rot_of(sliding), "head": ctx.head}[form.dims]
    base = {
        "context": ctx.base,
        "swa": ctx.base_swa if sliding else ctx.base,
        "10000": 10000.0,
        "compress": ctx.compress_base,
    }[form.base]
    scale = {
        "context": ctx.scale,
        "swa": ctx.scale_swa if sliding else ctx.scale,
        "one": 1.0,
    }[form.scale]
    ext = ctx.ext if form.yarn else 0.0
    attn = ctx.attn if form.yarn else 1.0
    if form.dsv4_attn:
        attn = ctx.dsv4_attention(scale, ext)
    mode: RopeType = form.mode or ctx.rope_type
    factors = None
    if form.factors and (row.factor_layers == "all" or (row.factor_layers == "full" and full)):
        factors = ctx.chosen
    n_ctx_orig = {"context": ctx.n_ctx_orig, "train": ctx.n_ctx_train, "zero": 0}[form.n_ctx_orig]
    return Call(
        n_dims=dims,
        n_ctx_orig=n_ctx_orig,
        freq_base=float(base),
        freq_scale=float(scale),
        ext_factor=float(ext),
        attn_factor=float(attn),
        beta_fast=ctx.beta_fast if form.betas else 0.0,
        beta_slow=ctx.beta_slow if form.betas else 0.0,
        rope_type=mode,
        sections=ctx.sections if mode in _MULTI else None,
        factors=factors,
    )


def _extras(row: Arch, ctx: Context, keys: Keys, flags: Layout, il: int) -> list[Turn]:
    turns = []
    for extra in row.extras:
        if extra.when_key is not None and keys.integer(extra.when_key, 0) <= 0:
            continue
        on = {
            "all": True,
            "full": not flags.sliding[il],
            "typed": flags.typed[il],
            "after_dense_lead": il >= flags.dense_lead,
            "compressed": flags.compressed[il],
        }[extra.layers]
        if on:
            call = _call(row, ctx, extra.form, il, flags.sliding[il], not flags.sliding[il])
            turns.append(Turn(call, extra.applies_to, extra.note))
    return turns


def _variant(row: Arch, keys: Keys) -> Arch:
    if row.variant is not None and keys.integer(row.variant[0], 0) > 0:
        return row.variant[1]
    return row


def calls(header: Header, n_ctx: int | None) -> Read:
    """Every layer's rope calls, with what they were read from.

    Raises :class:`GGUFError` for an architecture without a row, a key of the wrong type, or a
    file llama.cpp would refuse (a factor tensor of the wrong length or one it does not read).
    """
    row = row_of(header)
    keys = Keys(header, row.name)
    keys.read.append("general.architecture")
    row = _variant(row, keys)
    n_layer_all = keys.integer("block_count")
    n_layer = n_layer_all - keys.integer("nextn_predict_layers", 0)
    if row.layers_are_nextn:
        n_layer = n_layer_all
    if row.loops:
        n_layer = n_layer * max(1, keys.integer("num_loops", 1))
    # Both counts bounded before anything is sized by either (the layers run, and those kept).
    if not 0 < n_layer <= MAX_LAYERS or not 0 < n_layer_all <= MAX_LAYERS:
        raise GGUFError(
            f"{row.name}.block_count is {n_layer_all}, of which {n_layer} run: 1 to "
            f"{MAX_LAYERS} layers are read"
        )
    n_ctx_train = keys.integer("context_length")
    flags = layout(row, keys, n_layer, max(n_layer_all, n_layer), n_ctx_train)
    ctx = context(row, header, keys, n_ctx, flags.sliding)
    per_layer: list[Call | None] = []
    applies: list[tuple[str, ...]] = []
    extras: list[list[Turn]] = []
    for il in range(n_layer):
        sliding = flags.sliding[il]
        form = row.sliding if sliding else row.full
        if row.compressed is not None and flags.compressed[il]:
            form = row.compressed
        rotates = flags.rotates[il]
        per_layer.append(_call(row, ctx, form, il, sliding, not sliding) if rotates else None)
        applies.append(("q",) if flags.q_only[il] else row.attention)
        extras.append(_extras(row, ctx, keys, flags, il) if rotates else [])
    ctx.check_factors([c for c in per_layer if c is not None] + [t.call for e in extras for t in e])
    unstated = []
    for rope in row.unstated:
        on = flags.compressed if rope.layers == "compressed" else [True] * n_layer
        layers = [il for il in range(n_layer) if on[il]]
        if layers:
            unstated.append((layers, rope.applies_to, rope.reason))
    return Read(
        row=row,
        n_layer=n_layer,
        n_layer_all=n_layer_all,
        n_ctx=ctx.n_ctx,
        n_ctx_train=ctx.n_ctx_train,
        head_dim=ctx.head_k,
        per_layer=per_layer,
        applies=applies,
        extras=extras,
        unstated=unstated,
        sliding=flags.sliding,
        padded_n_ctx=ctx.padded,
        mscales=ctx.mscales,
        keys=keys.read,
        factors=ctx.present,
        mtp_layers=list(range(n_layer, n_layer_all)),
        notes=_notes(row, n_layer, n_layer_all),
    )


def _notes(row: Arch, n_layer: int, n_layer_all: int) -> list[str]:
    notes = [] if row.note is None else [row.note]
    if n_layer_all > n_layer and not row.layers_are_nextn and not row.loops:
        one = n_layer_all == n_layer + 1
        mtp = (
            f"layer {n_layer} (nextn_predict_layers) is a multi-token-prediction block"
            if one
            else f"layers {n_layer}–{n_layer_all - 1} (nextn_predict_layers) are "
            "multi-token-prediction blocks"
        )
        if row.mtp == "draft":
            notes.append(
                f"{mtp}: llama.cpp's decoder never runs {'it' if one else 'them'}; a draft "
                "context (LLAMA_CONTEXT_TYPE_MTP) runs it as a speculative head"
            )
        else:
            notes.append(
                f"{mtp} llama.cpp keeps in the file and never runs: its {row.name} has no "
                f"graph for {'it' if one else 'them'}"
            )
    return notes
