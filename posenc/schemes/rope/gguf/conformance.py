"""A GGUF file against the model it was converted from: does llama.cpp apply the rope the
model's ``config.json`` states (as ``/v1/rope/config`` reads it), at every layer, for ``n_ctx``?

Both sides become, layer by layer, the frequency of each pair and the factor cos and sin are
multiplied by: the model's from its canonical parameters (:func:`..scaling.scaled`, exact), the
file's from its ``ggml_rope_ext`` call (:func:`..recipes.ggml.frequencies`: ggml's formulas in
float64). Frequencies agree within :data:`TOLERANCE` (float32's rounding
of llama.cpp's parameters, not a finding); what differs is a finding, named by its likeliest
cause and listing its layers and the two sides' values.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.declare import Limits
from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope import maths
from posenc.schemes.rope.gguf import mrope_check
from posenc.schemes.rope.gguf.answer import answer_of
from posenc.schemes.rope.gguf.reader import Header
from posenc.schemes.rope.gguf.rules import Call, calls
from posenc.schemes.rope.models import answer as config_answer
from posenc.schemes.rope.models.verdict import Findings, Found, params_of, per_layer
from posenc.schemes.rope.params import Recipe, RopeParams
from posenc.schemes.rope.recipes import ggml as ggml_recipe
from posenc.schemes.rope.scaling import frequencies

# Relative difference of a frequency or attention factor that float32 parameters explain.
TOLERANCE = 1e-5
_SPLIT_TYPES = ("neox", "mrope", "imrope")


def _differs(
    a: npt.NDArray[np.float64] | float, b: npt.NDArray[np.float64] | float, frozen: float = 0.0
) -> bool:
    """Relative difference beyond :data:`TOLERANCE`; frequencies both below ``frozen`` (a
    pair turning less than float32 resolves over the whole context) are the same, still."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return True
    apart = np.abs(a - b) > TOLERANCE * np.maximum(np.abs(a), np.abs(b))
    return bool(np.any(apart & (np.maximum(np.abs(a), np.abs(b)) > frozen)))


def check(header: Header, config: Any, n_ctx: int | None, limits: Limits) -> dict[str, Any]:
    """The answer for a file and its model: the file's ropes, ``model``, ``conforms`` and
    ``findings``. Each layer's attention rope is compared with the model's; a second rope in
    the same layer (an indexer's) is reported, not compared: ``/v1/rope/config`` states one
    rope per layer."""
    if header.architecture == "clip":
        raise InconsistentError(
            "config",
            "the check against a model's config.json covers the text model's GGUF; a vision "
            "projector's (mmproj) ropes are answered without a verdict: send the file alone",
        )
    read = calls(header, n_ctx)
    result = answer_of(header, read)
    try:
        model = config_answer.describe(config, config_answer.servable_rows(limits))
    except ParameterError as error:
        raise type(error)(f"config.{error.param}", error.message) from None
    row = read.row
    file_calls = read.per_layer
    n_layer = len(file_calls)
    if model["num_hidden_layers"] not in (None, n_layer):
        raise InconsistentError(
            "config.num_hidden_layers",
            f"is {model['num_hidden_layers']}, the file has {n_layer} layers: not its model",
        )
    findings = Findings()
    # Layers share one or two ropes on each side: each pair is compared once (4096 layers of
    # 32768 pairs took 1.2 s compared layer by layer).
    compared: dict[tuple[int, Call, tuple[bool, bool] | None], list[Found]] = {}
    layer_ropes = per_layer(model, n_layer)
    for il, (mine, theirs) in enumerate(zip(layer_ropes, file_calls, strict=True)):
        if (mine is None) != (theirs is None):
            findings.add(
                (il,),
                (
                    "nope_layers",
                    "a layer rotates in one and not in the other",
                    {"model_rotates": mine is not None, "file_rotates": theirs is not None},
                ),
            )
            continue
        if mine is None or theirs is None:
            continue
        # A rope of one layer type says whether its layers slide; of several, it cannot.
        types = set(mine["layer_types"])
        slides = None if len(types) != 1 else ("sliding_attention" in types, read.sliding[il])
        key = (id(mine), theirs, slides)
        if key not in compared:
            compared[key] = _compare(mine, theirs, header, row.permuted, read.n_ctx, slides)
            compared[key] += mrope_check.findings(
                model["mrope"],
                params_of(mine["params"]),
                theirs.sections,
                theirs.rope_type,
                theirs.n_dims,
                read.n_ctx,
            )
        for found in compared[key]:
            findings.add((il,), found)
    for rope in result["ropes"]:
        first = rope["layers"][0]
        mine = layer_ropes[first]
        # The attention's rope is the model's; an indexer's is not compared.
        attention = list(read.applies[first]) == rope["applies_to"]
        rope["max_abs_difference"] = (
            recipe_noise(rope["params"], mine["params"], read.n_ctx)
            if mine is not None and attention
            else None
        )
    listed = findings.listed()
    return {**result, "model": model, "conforms": not listed, "findings": listed}


# Positions the recipe noise is measured at: the last before n_ctx, where float32 angles are
# coarsest. A pair's error at position p is bounded by ~p·2^-24; the largest positions bound
# the rest up to n_ctx.
NOISE_POSITIONS = 16


def recipe_noise(
    file_params: dict[str, Any], model_params: dict[str, Any], n_ctx: int
) -> dict[str, Any] | None:
    """llama.cpp's cos and sin (recipe=ggml of the file's rope) against the model's exact table
    and transformers' float32 recipe, at the :data:`NOISE_POSITIONS` positions before n_ctx."""
    if "rotary_pairs" in file_params:  # frozen pairs: recipe=ggml serves no rotary_pairs
        return None
    try:
        ported = params_of({**file_params, "recipe": "ggml", "layout": "split"})
        truth = replace(params_of(model_params), layout="split", recipe="exact")
    except ParameterError:
        return None
    if ported.d_model != truth.d_model:
        return None
    positions = np.arange(max(0, n_ctx - NOISE_POSITIONS), n_ctx, dtype=np.int64)
    ggml = maths.encode(ported, positions, "float64", "cos_sin")
    differences = {}
    against: tuple[tuple[str, Recipe], ...] = (("exact", "exact"), ("transformers", "framework"))
    for name, recipe in against:
        table = maths.encode(replace(truth, recipe=recipe), positions, "float64", "cos_sin")
        differences[name] = float(np.abs(ggml - table).max())
    return {"positions": [int(positions[0]), int(positions[-1])], **differences}


def _compare(
    rope: dict[str, Any],
    call: Call,
    header: Header,
    permuted: bool,
    n_ctx: int,
    slides: tuple[bool, bool] | None,
) -> list[Found]:
    """What differs between a model's rope and a file's call, as (kind, detail, evidence)."""
    found: list[Found] = []
    evidence: dict[str, Any]
    params = params_of(rope["params"])
    # The pairs the model's q and k turn: its cache's layout, unless its apply re-lays them.
    model_layout = params.layout
    if rope.get("apply") in ("interleaved", "interleaved_to_rotate_half"):
        model_layout = "interleaved"
    file_layout = "split" if call.rope_type in _SPLIT_TYPES or permuted else "interleaved"
    if model_layout != file_layout:
        detail = (
            f"llama.cpp's {call.rope_type.upper()} rope on the converter's Q/K weights turns "
            f"{file_layout} pairs; the model turns {model_layout} pairs"
        )
        evidence = {"model_layout": model_layout, "rope_type": call.rope_type, "permuted": permuted}
        found.append(("rope_type", detail, evidence))
    if params.d_model != call.n_dims:
        evidence = {"model": params.d_model, "file": call.n_dims}
        found.append(("rotary_width", "another number of dimensions rotates", evidence))
        return found
    if call.factors is not None:
        call = replace(call, freq_factors=tuple(header.rope_tensors[call.factors].tolist()))
    theirs, their_attention = ggml_recipe.frequencies(call)
    turns, attention = frequencies(params, n_ctx)
    mine = np.asarray(turns.radians, np.float64)
    if params.scaling == "longrope" and call.factors is not None:
        original = params.original_max_position_embeddings or 0
        if n_ctx > original:
            detail = (
                f"llama.cpp applies {call.factors} at every position for n_ctx={n_ctx}; the "
                f"model applies its short factors to sequences up to {original} tokens"
            )
            evidence = {"n_ctx": n_ctx, "original_max_position_embeddings": original}
            found.append(("longrope_by_context", detail, evidence))
    # Gemma 4's proportional rope freezes pairs with factor 1e30 (an angle of ~1e-30 per
    # position) where the model's frequency is 0: both turn less than 2^-24 rad by n_ctx.
    if _differs(mine, theirs, 2.0**-24 / max(n_ctx, 1)):
        kind, detail = _frequency_cause(params, call)
        if slides is not None and slides[0] != slides[1]:
            kind = "sliding_window_pattern"
            detail = (
                f"a {'sliding' if slides[0] else 'full'} layer of the model is a "
                f"{'sliding' if slides[1] else 'full'} one in the file ({detail})"
            )
        worst = int(np.argmax(np.abs(mine - theirs) / np.maximum(np.abs(mine), 1e-300)))
        evidence = {
            "model": {"base": params.base, "scaling": params.scaling, "factor": params.factor},
            "file": {
                "freq_base": call.freq_base,
                "freq_scale": call.freq_scale,
                "ext_factor": call.ext_factor,
                "freq_factors": call.factors,
            },
            "pair": worst,
            "model_frequency": float(mine[worst]),
            "file_frequency": float(theirs[worst]),
        }
        found.append((kind, detail, evidence))
    if _differs(attention, their_attention):
        evidence = {"model": attention, "file": their_attention}
        found.append(("attention_factor", "cos and sin are multiplied by another factor", evidence))
    return found


def _frequency_cause(params: RopeParams, call: Call) -> tuple[str, str]:
    if not math.isclose(float(np.float32(params.base)), call.freq_base, rel_tol=TOLERANCE):
        return "base", f"another base: the model's {params.base}, the file's {call.freq_base}"
    needs_factors = params.scaling in ("llama3", "longrope")
    if needs_factors and call.factors is None:
        return "factor_tensor_missing", (
            f"the model's {params.scaling} scaling needs a factor tensor; llama.cpp gets none"
        )
    if call.factors is not None:
        return "factor_tensor_wrong", f"{call.factors} does not hold the model's factors"
    file_scaling = "yarn" if call.ext_factor else ("linear" if call.freq_scale != 1 else "none")
    if file_scaling == "none":
        return "scaling_dropped", f"the model's {params.scaling} scaling is not in the file"
    untruncated = (
        "; ggml always rounds YaRN's ramp ends outwards, the model's truncate is false"
        if params.scaling == "yarn" and file_scaling == "yarn" and params.truncate is False
        else ""
    )
    return "scaling_changed", (
        f"the model's {params.scaling} scaling (factor {params.factor}) is the file's "
        f"{file_scaling} (freq_scale {call.freq_scale}){untruncated}"
    )
