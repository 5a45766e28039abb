"""An ONNX Runtime GenAI model against the model it was built from: is every cache it reads the
rope the model's ``config.json`` states (as ``/v1/rope/config`` reads it), for the layers and
the sequence lengths that read it?

Both sides become frequencies per pair and the factor of cos and sin: the model's exactly, from
its canonical parameters at the shortest length the cache serves (which picks LongRoPE's side),
the file's as measured from its rows (:mod:`.fit`). What differs beyond what float32
parameters and the rows' resolution explain is a finding, named by its likeliest cause and
listing its layers and both sides' values.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from posenc.declare import Limits
from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope.models import answer as config_answer
from posenc.schemes.rope.models.verdict import Findings, Found, params_of, per_layer
from posenc.schemes.rope.onnx import fit
from posenc.schemes.rope.onnx.answer import Hint, Rope
from posenc.schemes.rope.params import RopeParams


def describe(config: Any, limits: Limits) -> dict[str, Any]:
    """What ``/v1/rope/config`` says of the config part, its errors named under ``config``."""
    try:
        return config_answer.describe(config, config_answer.servable_rows(limits))
    except ParameterError as error:
        raise type(error)(f"config.{error.param}", error.message) from None


def layer_count(file_layers: int | None, model: dict[str, Any]) -> int:
    """The layers both sides have: the file's (genai_config.json's, else one past the last its
    nodes name), held to the config's where both state one; else the config's."""
    stated = model["num_hidden_layers"]
    if file_layers is None:
        return stated or 0
    if stated not in (None, file_layers):
        raise InconsistentError(
            "config.num_hidden_layers",
            f"is {stated}, the file has {file_layers} layers: not its model",
        )
    return file_layers


def hint(model: dict[str, Any], n_layer: int) -> Hint:
    """The model's rope for a file rope's first layer: the one its rows are fitted to first.
    ``n_layer`` is bounded (:func:`layer_count`)."""
    layers = per_layer(model, n_layer)

    def of(used: list[int], seq_len: int) -> RopeParams | None:
        mine = next((layers[il] for il in used if 0 <= il < n_layer), None)
        return None if mine is None else params_of(mine["params"])

    return of


def check(
    result: dict[str, Any], found: list[Rope], model: dict[str, Any], n_layer: int
) -> dict[str, Any]:
    """The answer with ``model``, ``conforms`` and ``findings``, over the ``n_layer`` layers of
    :func:`layer_count`."""
    serves = result["context_length"] or model.get("max_position_embeddings")
    layers = per_layer(model, n_layer)
    rotating = {il for rope in found for il in rope.layers}
    findings = Findings()
    for il in range(n_layer):
        rotates = il in rotating
        if rotates != (layers[il] is not None):
            evidence: dict[str, Any] = {
                "model_rotates": layers[il] is not None,
                "file_rotates": rotates,
            }
            findings.add(
                [il], ("nope_layers", "a layer rotates in one and not in the other", evidence)
            )
    others = [params_of(rope["params"]) for rope in model["ropes"]]
    for rope in found:
        by_model: dict[int, list[int]] = {}
        for il in rope.layers:
            mine = layers[il] if 0 <= il < n_layer else None
            if mine is not None:
                by_model.setdefault(id(mine), []).append(il)
        for mine_id, used in by_model.items():
            mine = next(r for r in model["ropes"] if id(r) == mine_id)
            for one in _compare(rope, mine, others, serves):
                findings.add(used, one)
    listed = findings.listed()
    return {**result, "model": model, "conforms": not listed, "findings": listed}


def _compare(
    rope: Rope, mine: dict[str, Any], others: list[RopeParams], serves: int | None
) -> list[Found]:
    found: list[Found] = []
    params = params_of(mine["params"])
    model_layout = params.layout
    if mine.get("apply") in ("interleaved", "interleaved_to_rotate_half"):
        model_layout = "interleaved"
    file_layout = "interleaved" if rope.interleaved else "split"
    if model_layout != file_layout:
        evidence: dict[str, Any] = {
            "model_layout": model_layout,
            "interleaved": rope.interleaved,
            "op": rope.uses[0].op.name,
        }
        found.append(
            (
                "interleaved",
                f"the file's {rope.uses[0].op.op_type} turns "
                f"{file_layout} pairs; the model turns {model_layout} pairs",
                evidence,
            )
        )
    found += _length(rope, params, serves)
    measured = rope.measured
    if rope.rotary_dim != params.d_model or measured is None:
        evidence = {"model": params.d_model, "file": rope.rotary_dim}
        found.append(("rotary_width", "another number of dimensions rotates", evidence))
        return found
    if not measured.rotation:
        found.append(
            (
                "not_a_rotation",
                "the rows are not the cos and sin of one angle each",
                {"attention_factor": measured.attention_factor},
            )
        )
        return found
    omega, attention = fit.exact(params, rope.seq_len)
    if not bool(np.all(fit.agree(measured, omega))):
        found.append(_frequency_cause(rope, params, omega, others))
    if not fit.factor_agrees(measured.attention_factor, attention, rope.dtype):
        lost = "lost" if abs(measured.attention_factor - 1) < abs(attention - 1) else "changed"
        evidence = {"model": attention, "file": measured.attention_factor}
        found.append(
            ("attention_factor", f"cos and sin are multiplied by another factor ({lost})", evidence)
        )
    return found


def _length(rope: Rope, params: RopeParams, serves: int | None) -> list[Found]:
    """A cache shorter than the lengths it serves, and LongRoPE's sides at another length."""
    found: list[Found] = []
    high = rope.served[1] if rope.served is not None else None
    wanted = high if high is not None else serves
    if wanted is not None and rope.length < wanted:
        evidence: dict[str, Any] = {"cache_length": rope.length, "serves": wanted}
        found.append(
            (
                "cache_too_short",
                f"the cache holds {rope.length} positions; it serves sequences up to {wanted}",
                evidence,
            )
        )
    if params.scaling != "longrope":
        return found
    original = params.original_max_position_embeddings or 0
    if rope.served is None:
        tests = [choice.test for choice in rope.uses[0].choices]
        found.append(
            (
                "longrope_switch",
                f"the cache is chosen by {', '.join(tests)}: not a test of the sequence length",
                {"tests": tests},
            )
        )
        return found
    low = rope.served[0]
    if low <= original < (high if high is not None else 2**63):
        evidence = {
            "sequence_lengths": list(rope.served),
            "original_max_position_embeddings": original,
        }
        found.append(
            (
                "longrope_switch",
                f"one cache serves sequences of {low} to "
                f"{high or 'any length'} tokens; the model switches from its short to its "
                f"long factors above {original}",
                evidence,
            )
        )
    return found


def _frequency_cause(
    rope: Rope, params: RopeParams, omega: np.ndarray, others: list[RopeParams]
) -> Found:
    measured = rope.measured
    assert measured is not None
    theirs = measured.frequencies
    worst = int(np.argmax(np.abs(theirs - omega) / np.maximum(np.abs(omega), 1e-300)))
    evidence: dict[str, Any] = {
        "model": {"base": params.base, "scaling": params.scaling, "factor": params.factor},
        "file": None
        if rope.params is None
        else {
            "base": rope.params.base,
            "scaling": rope.params.scaling,
            "factor": rope.params.factor,
        },
        "pair": worst,
        "model_frequency": float(omega[worst]),
        "file_frequency": float(theirs[worst]),
    }
    turning = theirs[np.abs(theirs) > measured.uncertainty]
    if len(turning) > 1 and (np.any(turning < 0) or np.all(np.diff(turning) > 0)):
        return (
            "frequencies_inverted",
            "the pairs turn the other way or in reverse order",
            evidence,
        )
    for other in others:
        if other != params and _fits(rope, other):
            evidence["fits"] = {"base": other.base, "scaling": other.scaling}
            return (
                "sliding_layer",
                "the layers turn by the model's rope of other layers",
                evidence,
            )
    if params.scaling == "longrope":
        original = params.original_max_position_embeddings or 0
        side = original + 1 if rope.seq_len <= original else 1
        if _fits(rope, params, side):
            return (
                "longrope_switch",
                "the cache holds the other side's factors (long for "
                "short sequences, or short for long)",
                evidence,
            )
    if params.scaling != "none" and _fits(rope, _unscaled(params)):
        return (
            "scaling_dropped",
            f"the model's {params.scaling} scaling is not in the cache",
            evidence,
        )
    if rope.params is not None and not np.isclose(
        rope.params.base, params.base, rtol=fit.TOLERANCE
    ):
        if _fits(rope, replace(params, base=rope.params.base)):
            return (
                "base",
                f"another base: the model's {params.base}, the cache's {rope.params.base}",
                evidence,
            )
    moved = np.flatnonzero(~fit.agree(measured, omega)).tolist()
    evidence["pairs"] = moved
    return (
        "scaling_changed",
        f"the model's {params.scaling} scaling is another in the cache: pairs "
        f"{moved[0]}–{moved[-1]} turn at other frequencies ({len(moved)} of {len(omega)})",
        evidence,
    )


def _fits(rope: Rope, params: RopeParams, seq_len: int | None = None) -> bool:
    measured = rope.measured
    assert measured is not None
    if params.d_model != rope.rotary_dim:
        return False
    omega = fit.exact(params, seq_len or rope.seq_len)[0]
    return bool(np.all(fit.agree(measured, omega)))


def _unscaled(params: RopeParams) -> RopeParams:
    return RopeParams(
        d_model=params.d_model,
        base=params.base,
        layout=params.layout,
        rotary_pairs=params.rotary_pairs,
    )
