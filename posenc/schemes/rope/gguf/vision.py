"""A vision projector's rope (an ``mmproj`` file, ``general.architecture`` ``clip``): what
llama.cpp's multimodal library (``tools/mtmd``: ``clip.cpp`` and its graphs in
``tools/mtmd/models``) turns the patches of each vision layer by, per projector type, as data.

Two ropes are stated. The Qwen2-VL family's (and its kin's) is one ``ggml_rope_multi`` in
VISION mode: ``n_dims = d/2`` and four sections of ``d/4``, each restarting the frequencies
``θ^(−2k/(d/2))``, so the first ``d/4`` pairs ``(i, i + d/2)`` turn by the patch's row and the
next ``d/4`` by its column. ``build_rope_2d`` (Pixtral, Llama 4, Kimi, Step3-VL, MUSE Glimmer) is
two NORMAL ``ggml_rope_ext`` calls over the two halves of the head, each ``d/2`` wide and turned
by one axis; Pixtral's second half has ``freq_scale = θ^(−2/d)``, its odd frequencies. A
projector whose graph turns its patches otherwise, or an audio encoder's rope, is named in
``unstated`` with why; a projector with learned positions has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from posenc.schemes.rope.gguf.arches import LLAMA_CPP_SOURCE, LLAMA_CPP_VERSION
from posenc.schemes.rope.gguf.reader import GGUFError, Header
from posenc.schemes.rope.recipes.llama_cpp import libm

_VISION = 24  # GGML_ROPE_TYPE_VISION
_MTMD = "tools/mtmd/models/"


@dataclass(frozen=True)
class Projector:
    """One projector type's rope, as its clip graph calls it."""

    source: str
    kind: Literal["vision", "2d", "none", "unstated"]
    base: float = 10000.0
    # VISION mode's sections: four of d/4, or d/4 twice and none (DeepSeek-V4's tower).
    sections: Literal["quarter", "half"] = "quarter"
    # ggml_rope_multi's n_ctx_orig and betas: 32768, 32 and 1, or 0 throughout.
    plain: bool = False
    # build_rope_2d: the axis of the first half, and Pixtral's odd frequencies on the second.
    first: Literal["row", "column"] = "column"
    odd: bool = False
    reason: str = ""
    # The keys of its tower: clip.vision.* or, for an audio encoder, clip.audio.*.
    modality: Literal["vision", "audio"] = "vision"


_QWEN = Projector(_MTMD + "qwen2vl.cpp", "vision")
_UNREAD = "its clip graph turns the patches otherwise; not stated here"
_AUDIO = "an audio encoder's or generator's rope over its frames: not read here"
PROJECTORS: dict[str, Projector] = {
    "qwen2vl_merger": _QWEN,
    "qwen2.5vl_merger": _QWEN,
    "qwen3vl_merger": Projector(_MTMD + "qwen3vl.cpp", "vision"),
    "ling3vl": Projector(_MTMD + "ling3vl.cpp", "vision"),
    "youtuvl": Projector(_MTMD + "youtuvl.cpp", "vision"),
    "glm4v": Projector(_MTMD + "glm4v.cpp", "vision"),
    "glm5v": Projector(_MTMD + "glm4v.cpp", "vision"),
    "paddleocr": Projector(_MTMD + "paddleocr.cpp", "vision"),
    "dots_ocr": Projector(_MTMD + "dotsocr.cpp", "vision"),
    "dots3note_v": Projector(_MTMD + "dotsocr.cpp", "vision"),
    "exaone4_5": Projector(_MTMD + "exaone4_5.cpp", "vision"),
    "deepseek4v": Projector(_MTMD + "deepseek4v.cpp", "vision", sections="half", plain=True),
    "pixtral": Projector(_MTMD + "pixtral.cpp", "2d", first="row", odd=True),
    "lightonocr": Projector(_MTMD + "pixtral.cpp", "2d", first="row", odd=True),
    "llama4": Projector(_MTMD + "llama4.cpp", "2d"),
    "kimivl": Projector(_MTMD + "kimivl.cpp", "2d"),
    "kimik25": Projector(_MTMD + "kimik25.cpp", "2d"),
    "step3vl": Projector(_MTMD + "step3vl.cpp", "2d"),
    "muse-glimmer": Projector(_MTMD + "muse-glimmer.cpp", "2d"),
    "gemma4v": Projector(_MTMD + "gemma4v.cpp", "unstated", reason=_UNREAD),
    # Gemma 4 unified: learned x and y position tables, no rope.
    "gemma4uv": Projector(_MTMD + "gemma4uv.cpp", "none"),
    "minimax_m3": Projector(_MTMD + "minimax-m3.cpp", "unstated", reason=_UNREAD),
    "mimovl": Projector(_MTMD + "mimovl.cpp", "unstated", reason=_UNREAD),
    "deepseekocr2": Projector(_MTMD + "deepseekocr2.cpp", "unstated", reason=_UNREAD),
    # Audio encoders and generators turn their frames by ropes of their own.
    **{
        name: Projector(_MTMD + source, "unstated", reason=_AUDIO, modality="audio")
        for name, source in (
            ("dots3note_a", "dots3note.cpp"),
            ("mimo_audio", "mimo-audio.cpp"),
            ("qwen3tts_gen", "qwen3tts-gen.cpp"),
            ("pockettts_spkenc", "pockettts-spkenc.cpp"),
            ("pockettts_gen", "pockettts-gen.cpp"),
        )
    },
    # Learned absolute positions (SigLIP, CLIP, InternViT …): no rope.
    **{
        name: Projector(_MTMD + "siglip.cpp", "none")
        for name in ("gemma3", "idefics3", "lfm2", "janus_pro", "phi4")
    },
    **{
        name: Projector(_MTMD + "llava.cpp", "none")
        for name in ("mlp", "mlp_norm", "ldp", "ldpv2", "adapter")
    },
}


def _call(n_dims: int, mode: int, base: float, scale: float, plain: bool) -> dict[str, Any]:
    return {
        "n_dims": n_dims,
        "mode": mode,
        "n_ctx_orig": 0 if plain else 32768,
        "freq_base": base,
        "freq_scale": scale,
        "ext_factor": 0.0,
        "attn_factor": 1.0,
        "beta_fast": 0.0 if plain else 32.0,
        "beta_slow": 0.0 if plain else 1.0,
        "sections": None,
        "freq_factors": None,
    }


def _ropes(projector: Projector, head: int, layers: list[int]) -> list[dict[str, Any]]:
    half = head // 2
    params = {"d_model": half, "base": projector.base, "scaling": "none"}
    if projector.kind == "vision":
        call = _call(half, _VISION, projector.base, 1.0, projector.plain)
        quarter = head // 4
        whole = projector.sections == "quarter"
        call["sections"] = [quarter] * 4 if whole else [quarter] * 2 + [0, 0]
        return [_rope(layers, "vision", ["q", "k"], {**params, "layout": "split"}, call)]
    axes = ("row", "column") if projector.first == "row" else ("column", "row")
    ropes = [
        _rope(
            layers,
            "norm",
            [f"q:{axes[0]}", f"k:{axes[0]}"],
            {**params, "layout": "interleaved"},
            _call(half, 0, projector.base, 1.0, True),
        )
    ]
    second = {**params, "layout": "interleaved"}
    scale = 1.0
    if projector.odd:  # build_rope_2d's freq_scale_odd = powf(base, −2/n_dim)
        scale = float(libm("powf", projector.base, -2.0 / head))
        second.update(scaling="linear", factor=1.0 / scale)
    call = _call(half, 0, projector.base, scale, True)
    ropes.append(_rope(layers, "norm", [f"q:{axes[1]}", f"k:{axes[1]}"], second, call))
    return ropes


def _rope(
    layers: list[int], kind: str, applies_to: list[str], params: dict[str, Any], call: Any
) -> dict[str, Any]:
    return {
        "layers": layers,
        "rope_type": kind,
        "applies_to": applies_to,
        "params": params,
        "ggml": call,
        "read_from": {"keys": [], "tensors": []},
    }


def answer(header: Header) -> dict[str, Any]:
    """What ``POST /v1/rope/gguf`` answers for a vision projector's header."""
    values = header.values
    name = values.get("clip.vision.projector_type", values.get("clip.projector_type"))
    if not isinstance(name, str):
        raise GGUFError("the clip file names no clip.projector_type: it is not a projector")
    projector = PROJECTORS.get(name)
    tower = "audio" if projector is not None and projector.modality == "audio" else "vision"

    def integer(key: str, default: int | None = None) -> int:
        value = values.get(f"clip.{tower}.{key}", default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise GGUFError(f"clip.{tower}.{key} is {value!r}: an integer is needed")
        return value

    n_layer = integer("block_count")
    if not 0 < n_layer <= 4096:
        raise GGUFError(f"clip.vision.block_count is {n_layer}: 1 to 4096 layers are read")
    heads = integer("attention.head_count")
    head = integer("attention.head_dim", 0) or integer("embedding_length") // max(heads, 1)
    turns = projector is not None and projector.kind in ("vision", "2d")
    if turns and (not 4 <= head <= 2 * 65536 or head % 4):
        # Each axis turns half the head: a rope of d_model ≤ 65536, as every rope served.
        raise GGUFError(
            f"the vision head is {head} wide: a multiple of 4 up to 131072 turns by two axes"
        )
    layers = list(range(n_layer))
    ropes: list[dict[str, Any]] = []
    unstated: list[dict[str, Any]] = []
    notes = [
        f"a {tower} projector ({name}): its layers see image patches (or audio frames), not "
        "text tokens by position"
    ]
    if projector is None:
        reason = f"projector type {name!r} has no row here: not read"
        unstated.append({"layers": layers, "applies_to": ["q", "k"], "reason": reason})
    elif projector.kind == "unstated":
        unstated.append({"layers": layers, "applies_to": ["q", "k"], "reason": projector.reason})
    elif projector.kind == "none":
        notes.append("its tower adds learned position embeddings and turns no rope")
    else:
        ropes = _ropes(projector, head, layers)
    keys = [k for k in values if k.startswith("clip.")]
    for rope in ropes:
        rope["read_from"]["keys"] = keys
    return {
        "architecture": "clip",
        "num_hidden_layers": n_layer,
        "context_length": 0,
        "n_ctx": 0,
        "head_dim": head,
        "ropes": ropes,
        "nope_layers": [] if ropes or unstated else layers,
        "mrope": None,
        "mtp_layers": [],
        "unstated": unstated,
        "notes": notes,
        "llama_cpp_version": {"commit": LLAMA_CPP_VERSION, "source": LLAMA_CPP_SOURCE},
        "llama_cpp_rules": "tools/mtmd/clip.cpp" if projector is None else projector.source,
    }
