"""llama.cpp's rope rules, one row per architecture: data, not branches.

Read from llama.cpp at :data:`LLAMA_CPP_VERSION`: the rope type of each architecture from
``llama_model_rope_type`` (``src/llama-model.cpp``); the keys every architecture reads and their
defaults from ``llama_model_base::load_hparams`` (a base of 10000, scaling ``linear`` with no
factor, ``n_ctx_orig_yarn`` the training context, ``n_rot`` the head width); each architecture's
own keys and sliding-window layers from its ``load_arch_hparams`` (``src/models/<arch>.cpp``),
``set_swa_pattern`` (``src/llama-hparams.cpp``); which base, scale and factor tensor each layer's
``ggml_rope_ext`` gets from the graph it runs; YaRN's ``ext_factor`` and attention factor from
``llama_context``'s constructor (``src/llama-context.cpp``), applied in :mod:`..scalars`.

Every architecture ``llama_model_rope_type`` gives a rope has a row — in one table, written by
family in the modules beside this one; a file of an architecture it gives none (Mamba, RWKV,
T5, a vision projector's ``clip``) is refused by name.
"""

from __future__ import annotations

from posenc.schemes.rope.gguf.arches import encoders, hybrids, mla, multimodal, neox, norm, sliding
from posenc.schemes.rope.gguf.arches.fields import (
    NO_YARN,
    PLAIN,
    Arch,
    Extra,
    Form,
    Swa,
    Unstated,
)
from posenc.schemes.rope.recipes.llama_cpp import RopeType

LLAMA_CPP_VERSION = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
LLAMA_CPP_SOURCE = "llama-cpp-python 0.3.36 (vendor/llama.cpp)"

__all__ = [
    "ARCHES",
    "LLAMA_CPP_SOURCE",
    "LLAMA_CPP_VERSION",
    "NO_YARN",
    "PLAIN",
    "Arch",
    "Extra",
    "Form",
    "RopeType",
    "Swa",
    "Unstated",
]


def _rows(*families: tuple[Arch, ...]) -> dict[str, Arch]:
    rows = [row for family in families for row in family]
    table = {row.name: row for row in rows}
    assert len(table) == len(rows), "an architecture has two rows"
    return table


ARCHES: dict[str, Arch] = _rows(
    norm.ROWS,
    neox.ROWS,
    sliding.ROWS,
    mla.ROWS,
    hybrids.ROWS,
    multimodal.ROWS,
    encoders.ROWS,
)
