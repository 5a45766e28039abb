"""The scalars llama.cpp derives from a GGUF file's keys before any layer is built, in float32
as it computes them: the widths (``n_rot``, ``n_rot_swa``, the head), the bases and scales of
full and sliding layers, YaRN's ``ext_factor``, attention factor and betas
(``llama_context``'s constructor, ``src/llama-context.cpp``), the rope type and sections, and
which factor tensor the context's length picks (``get_rope_factors``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from posenc.schemes.rope.gguf.arches import Arch, RopeType
from posenc.schemes.rope.gguf.reader import ROPE_TENSORS, GGUFError, Header
from posenc.schemes.rope.gguf.values import Keys
from posenc.schemes.rope.recipes.llama_cpp import LIBLLAMA_CONTRACTS, libm, yarn_attention

_SCALINGS = ("none", "linear", "yarn", "longrope")
_PAD = 256  # llama_context pads n_ctx (and n_ctx_seq) to a multiple of 256
_F32 = np.float32


@dataclass(frozen=True)
class Context:
    """What every layer's call is built from (``llm_graph_context``'s members and the hparams
    beside them)."""

    n_ctx: int
    padded: int
    n_ctx_train: int
    n_ctx_orig: int
    head_k: int
    head: int
    n_rot_full: int
    n_rot_swa: int
    # The graph's n_rot: hparams.n_rot(), layer 0's.
    n_rot: int
    base: float
    base_swa: float
    scale: float
    scale_swa: float
    ext: float
    attn: float
    beta_fast: float
    beta_slow: float
    rope_type: RopeType
    sections: tuple[int, ...] | None
    compress_base: float
    present: tuple[str, ...]
    chosen: str | None
    factor_length: int
    factor_width: str
    mscales: tuple[float, float] | None
    rope_tensors: Any

    def n_rot_of(self, sliding: bool) -> int:
        """``hparams.n_rot(il)``."""
        return self.n_rot_swa if sliding else self.n_rot_full

    def dsv4_attention(self, scale: float, ext: float) -> float:
        """DeepSeek-V4's ``dsv4_rope_attn_factor``: 1/(1 + 0.1·logf(1/freq_scale)) with YaRN on,
        in libllama's arithmetic (two roundings where it is built without FMA)."""
        if ext == 0:
            return 1.0
        log = libm("logf", _F32(1) / _F32(scale))
        if LIBLLAMA_CONTRACTS:
            growth = libm("fmaf", _F32(0.1), log, _F32(1))
        else:
            growth = _F32(_F32(_F32(0.1) * log) + _F32(1))
        return float(_F32(_F32(1) / growth))

    def check_factors(self, calls: list[Any]) -> None:
        """llama.cpp refuses a factor tensor of another length than it creates; ggml needs
        n_dims/2 factors at least."""
        for name in self.present:
            length = len(self.rope_tensors[name])
            if length != self.factor_length:
                raise GGUFError(
                    f"tensor {name} holds {length} factors: llama.cpp wants "
                    f"{self.factor_width}/2 = {self.factor_length} and refuses the file"
                )
        for call in calls:
            if call.factors is not None and self.factor_length < call.n_dims // 2:
                raise GGUFError(
                    f"tensor {call.factors} holds {self.factor_length} factors: ggml needs "
                    f"n_dims/2 = {call.n_dims // 2}"
                )


def _widths(row: Arch, keys: Keys) -> tuple[int, int, int, int]:
    """The head's width, n_embd/n_head, and n_rot of the full and sliding layers."""
    n_embd = keys.integer("embedding_length")
    n_head = keys.integer("attention.head_count")
    if n_head <= 0:
        raise GGUFError(f"{row.name}.attention.head_count is {n_head}: no attention heads")
    head_k = keys.integer("attention.key_length", n_embd // n_head)
    n_rot = keys.integer("rope.dimension_count", head_k)
    if row.n_rot_is_head and n_rot != head_k:
        raise GGUFError(
            f"{row.name}.rope.dimension_count is {n_rot}: llama.cpp refuses a {row.name} file "
            f"whose rope is not the head width {head_k}"
        )
    n_rot_swa = keys.integer("rope.dimension_count_swa", n_rot)
    if row.n_rot_full_halved:
        n_rot //= 2
    for name, width in (("rope.dimension_count", n_rot), ("rope.dimension_count_swa", n_rot_swa)):
        if not 2 <= width <= 65536 or width % 2:
            raise GGUFError(
                f"{row.name}.{name} (or the head width) is {width}: an even width of 2 to "
                "65536 is served"
            )
    return head_k, n_embd // n_head, n_rot, n_rot_swa


def _rope_type(row: Arch, keys: Keys) -> tuple[RopeType, tuple[int, ...] | None]:
    if row.sections == "none":
        return row.rope_type, None
    given = keys.get("rope.dimension_sections")
    if given is None:
        if row.sections == "required":
            raise GGUFError(f"the file has no {row.name}.rope.dimension_sections")
        return row.rope_type, None
    if not isinstance(given, tuple) or not all(isinstance(s, int) for s in given):
        raise GGUFError(f"{row.name}.rope.dimension_sections is {given!r}")
    sections = tuple(int(s) for s in given[:4]) + (0,) * (4 - len(given[:4]))
    if row.sections == "required":
        return row.rope_type, sections
    # hparams.use_mrope: the first two set; DFlash: any of them
    used = sections[0] > 0 and sections[1] > 0 if row.sections == "optional" else any(sections)
    return (row.sections_type, sections) if used else (row.rope_type, None)


def _yarn(row: Arch, keys: Keys, scaling: str, scale: np.float32) -> tuple[float, float, float]:
    """ext_factor, attn_factor and the yarn_log_multiplier llama-context.cpp derives."""
    ext = _F32(-1)
    attn = _F32(1)
    if row.yarn_keys == "grok":
        ext = _F32(keys.number("rope.scaling.yarn_ext_factor", -1.0))
        attn = _F32(keys.number("rope.scaling.yarn_attn_factor", 1.0))
    if ext < 0:
        ext = _F32(1 if scaling == "yarn" else 0)
    log_mul = _F32(0)
    if row.yarn_keys == "mistral3" or row.log_mul_divided:
        log_mul = _F32(keys.number("rope.scaling.yarn_log_multiplier", 0.0))
    if row.log_mul_divided and log_mul != 0:
        log_mul = _F32(log_mul / _F32(0.1))
    if ext != 0:
        mscale = log_mul if row.mscale_is_log_mul and log_mul != 1 else _F32(1)
        attn = yarn_attention(_F32(1) / scale, mscale, log_mul)
    attn = _F32(attn * _F32(keys.number("rope.scaling.attn_factor", 1.0)))
    return float(ext), float(attn), float(log_mul)


def _base(row: Arch, keys: Keys, head_k: int) -> np.float32:
    base = _F32(keys.number("rope.freq_base", 10000.0))
    alpha = _F32(keys.number("rope.scaling.alpha", 0.0)) if row.base_alpha else _F32(0)
    if alpha > 0:
        # hunyuan-vl.cpp: base · powf(alpha, (float)dim / (float)(dim − 2))
        if head_k <= 2:
            raise GGUFError(f"{row.name}: a head of {head_k} takes no rope.scaling.alpha")
        exponent = _F32(_F32(head_k) / _F32(head_k - 2))
        base = _F32(base * libm("powf", alpha, exponent))
    if not 1 < base < np.inf:
        raise GGUFError(f"{row.name}: the rope's base comes to {base}; one above 1 is needed")
    return base


def _factor_tensors(header: Header, row: Arch, scaling: str) -> tuple[str, ...]:
    """The factor tensors llama.cpp creates for this file; any other rope tensor in the file
    is one llama.cpp does not create, and it refuses the file ("wrong number of tensors")."""
    if row.factors == "freqs" or (row.factors == "by_scaling" and scaling != "longrope"):
        readable: tuple[str, ...] = ("rope_freqs.weight",)
    elif row.factors in ("long_short", "by_scaling"):
        readable = ("rope_factors_long.weight", "rope_factors_short.weight")
    else:
        readable = ()
    present = tuple(name for name in ROPE_TENSORS if name in header.tensors)
    for name in present:
        if name not in readable:
            raise GGUFError(
                f"tensor {name}: llama.cpp's {row.name} ({row.source}"
                f"{', rope.scaling.type ' + scaling if row.factors == 'by_scaling' else ''}) "
                "creates no such tensor and refuses the file"
            )
    return present


def context(
    row: Arch, header: Header, keys: Keys, n_ctx: int | None, sliding: list[bool]
) -> Context:
    """The scalars of a file's calls for the context ``n_ctx`` (default the training one)."""
    n_ctx_train = keys.integer("context_length")
    head_k, head, n_rot, n_rot_swa = _widths(row, keys)
    n_ctx_orig = keys.integer("rope.scaling.original_context_length", n_ctx_train) or n_ctx_train
    n_ctx = n_ctx_train if n_ctx is None or n_ctx == 0 else n_ctx
    padded = -(-n_ctx // _PAD) * _PAD
    base = _base(row, keys, head_k)
    scaling, scale = _scaling(row, keys)
    ext, attn, log_mul = _yarn(row, keys, scaling, scale)
    beta_fast, beta_slow = _betas(row, keys)
    base_swa, scale_swa = _sliding(row, keys, sliding, base, scale)
    rope_type, sections = _rope_type(row, keys)
    present = _factor_tensors(header, row, scaling)
    chosen = _chosen_factors(present, padded, n_ctx_orig)
    widest = max(n_rot, n_rot_swa) if any(sliding) else n_rot
    layer0 = n_rot_swa if sliding[0] else n_rot
    factor_length = {"n_rot": layer0, "head": head_k, "n_rot_max": widest}[row.factor_length]
    compress = row.compressed is not None or any(e.form.base == "compress" for e in row.extras)
    mscales = None
    if row.log_mul_divided and log_mul != 0:
        mscales = (log_mul if row.mscale_is_log_mul and log_mul != 1 else 1.0, log_mul)
    return Context(
        n_ctx=n_ctx,
        padded=padded,
        n_ctx_train=n_ctx_train,
        n_ctx_orig=n_ctx_orig,
        head_k=head_k,
        head=head,
        n_rot_full=n_rot,
        n_rot_swa=n_rot_swa,
        n_rot=layer0,
        base=float(base),
        base_swa=base_swa,
        scale=float(scale),
        scale_swa=scale_swa,
        ext=ext,
        attn=attn,
        beta_fast=beta_fast,
        beta_slow=beta_slow,
        rope_type=rope_type,
        sections=sections,
        compress_base=keys.number("attention.compress_rope_freq_base", None) if compress else 0,
        present=present,
        chosen=chosen,
        factor_length=factor_length // 2,
        factor_width={"n_rot": "n_rot", "head": "n_embd_head", "n_rot_max": "the widest n_rot"}[
            row.factor_length
        ],
        mscales=mscales,
        rope_tensors=header.rope_tensors,
    )


def _scaling(row: Arch, keys: Keys) -> tuple[str, np.float32]:
    """The scaling llama.cpp reads and its frequency scale, in float32 as llama.cpp holds it."""
    scaling = keys.text("rope.scaling.type", "linear")
    if scaling not in _SCALINGS:
        raise GGUFError(
            f"{row.name}.rope.scaling.type is {scaling!r}: llama.cpp reads {', '.join(_SCALINGS)}"
        )
    factor = keys.get("rope.scaling.factor")
    ropescale = keys.number("rope.scaling.factor" if factor is not None else "rope.scale_linear", 0)
    scale = _F32(1) if ropescale == 0 or scaling == "none" else _F32(1) / _F32(ropescale)
    return scaling, scale


def _betas(row: Arch, keys: Keys) -> tuple[float, float]:
    """YaRN's beta_fast and beta_slow: Grok's defaults or llama.cpp's, else the file's."""
    beta_fast = 8.0 if row.yarn_keys == "grok" else 32.0
    beta_slow = 1.0
    if row.yarn_keys != "none":
        beta_fast = keys.number("rope.scaling.yarn_beta_fast", beta_fast)
        beta_slow = keys.number("rope.scaling.yarn_beta_slow", beta_slow)
    return beta_fast, beta_slow


def _sliding(
    row: Arch, keys: Keys, sliding: list[bool], base: np.float32, scale: np.float32
) -> tuple[float, float]:
    """The sliding layers' base and scale, as the architecture's row says llama.cpp takes them."""
    if row.swa is None or not any(sliding):
        return float(base), float(scale)
    fallback = float(base) if row.swa.base in ("key_or_base", "base") else 10000.0
    base_swa = fallback
    if row.swa.base.startswith("key"):
        base_swa = keys.number("rope.freq_base_swa", None if row.swa.base == "key" else fallback)
    return base_swa, float(scale) if row.swa.scale == "full" else 1.0


def _chosen_factors(present: tuple[str, ...], padded: int, n_ctx_orig: int) -> str | None:
    """The factor tensor llama.cpp passes: rope_freqs, else LongRoPE's long pair for a padded
    context past the original, its short pair otherwise (None where that one is missing)."""
    if "rope_freqs.weight" in present:
        return "rope_freqs.weight"
    if not present:
        return None
    chosen = "rope_factors_long.weight" if padded > n_ctx_orig else "rope_factors_short.weight"
    return chosen if chosen in present else None
