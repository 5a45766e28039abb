"""``base_mismatch`` / ``scaling_mismatch``: the frequencies read off the cache fit another
base, scaling, factor or original length, fitted in ``ln ω`` within the reading's noise; the
fewest changes win, then the closest fit, and a fitted base or factor keeps the fewest digits
that still fit."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.errors import ParameterError
from posenc.schemes.rope.conformance.partial import wider_head
from posenc.schemes.rope.conformance.reading import Reading
from posenc.schemes.rope.conformance.rows import Float64Array, Model, table_length
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import framework
from posenc.schemes.rope.scaling import frequencies

# The scaling factors and original context lengths tried when the stated ones do not fit.
_FACTORS = (1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 16.0, 20.0, 32.0, 40.0, 64.0)
_ORIGINALS = (2048, 4096, 8192, 32768)
# A reading of ln ω_i is trusted to this; a fit must agree with every trusted reading.
_LOG_FLOOR = 1e-5
_USABLE = 1e-2


def fit_spectrum(frame: Model, reading: Reading, n: int) -> tuple[Model, list[Finding]]:
    """``frame`` with the parameters whose frequencies fit the trusted readings, and what
    changed; ``frame`` itself when the stated frequencies fit or nothing does."""
    params, length = frame.params, table_length(frame, n)
    findings: list[Finding] = []
    with np.errstate(invalid="ignore"):
        usable = (
            np.isfinite(reading.omega) & (reading.omega > 0) & (reading.relative_noise < _USABLE)
        )
    fitted = params
    if usable.any() and _misfit(reading, usable, _spectrum(params, length)) > 1:
        best: tuple[int, float, RopeParams] | None = None
        for candidate in _valid(_candidates(params, reading, usable, length)):
            misfit = _misfit(reading, usable, _spectrum(candidate, length))
            changes = _changes(params, candidate)
            if misfit <= 1 and (best is None or (changes, misfit) < best[:2]):
                best = (changes, misfit, candidate)
        if best is not None:
            fitted = _rounded(best[2], reading, usable, length)
            findings.extend(_spectrum_findings(params, fitted, usable))
    return replace(frame, params=fitted), findings


def _spectrum(params: RopeParams, length: int) -> Float64Array:
    """A candidate's frequencies by transformers' float32 recipe: fast, and 2^-24 from exact,
    far inside what a reading can tell apart; exact for a GGUF's factor tensor, which
    transformers does not take."""
    if params.freq_factors is not None:
        turns, _ = frequencies(params, length)
        return np.asarray(turns.radians, np.float64)
    inv_freq, _ = framework.frequencies(replace(params, recipe="framework"), length)
    return inv_freq.astype(np.float64)


def _misfit(reading: Reading, usable: npt.NDArray[np.bool_], omega: Float64Array) -> float:
    """The largest ``|ln ω̂ − ln ω|`` over trusted readings, in units of their noise."""
    tolerance = np.maximum(20 * reading.relative_noise[usable], _LOG_FLOOR)
    with np.errstate(divide="ignore", invalid="ignore"):
        deviation = np.abs(np.log(reading.omega[usable]) - np.log(omega[usable]))
    result = float(np.max(deviation / tolerance, initial=0.0))
    return result if math.isfinite(result) else math.inf


def _with(params: RopeParams, **changes: Any) -> RopeParams:
    """``params`` with another scaling (its own fields only) or another base."""
    scaling = changes.get("scaling", params.scaling)
    if scaling == params.scaling:
        return replace(params, **changes)
    return RopeParams(
        d_model=params.d_model,
        base=changes.get("base", params.base),
        layout=params.layout,
        scaling=scaling,
        factor=changes.get("factor"),
        original_max_position_embeddings=changes.get("original_max_position_embeddings"),
    )


def _shortest(value: float, fits: Any) -> float:
    """The value with the fewest significant digits that still fits."""
    for digits in range(1, 10):
        rounded = float(f"{value:.{digits}g}")
        if fits(rounded):
            return rounded
    return value


def _candidates(
    params: RopeParams, reading: Reading, usable: npt.NDArray[np.bool_], length: int
) -> Iterator[RopeParams]:
    """Parameters that may have built the cache, simplest first."""
    d = params.d_model
    i = np.arange(d // 2, dtype=np.float64)
    log_omega = np.log(reading.omega[usable])
    at = i[usable]
    bases = [params.base]
    # ln ω_i = −ln f − (2i/d)·ln base: a line through the trusted readings.
    if usable.sum() >= 2 and np.ptp(at) > 0:
        slope, intercept = np.polyfit(at, log_omega, 1)
        if slope < 0:
            fitted = math.exp(-slope * d / 2)
            bases.append(fitted)
            if 1.0 < fitted <= 1e12 and abs(intercept) > _LOG_FLOOR:
                yield _with(params, scaling="linear", factor=math.exp(-intercept), base=fitted)
    if (at > 0).any():
        origin = at > 0  # through the origin: the unscaled spectrum, base alone
        bases.append(math.exp(float(np.median(-log_omega[origin] * d / (2 * at[origin])))))
    bases = [b for b in bases if 1.0 < b <= 1e12]
    for base in bases[1:]:
        yield replace(params, base=base)
    for base in bases:
        yield _with(params, scaling="none", base=base)
    unscaled = _spectrum(_with(params, scaling="none"), length)
    lowest = np.flatnonzero(usable)
    if len(lowest):
        ratio = float(unscaled[lowest[-1]] / reading.omega[lowest[-1]])
        if 0 < ratio <= 1e6:
            yield _with(params, scaling="linear", factor=ratio)
    yield from _named_scalings(params, bases[:1])


def _named_scalings(params: RopeParams, bases: list[float]) -> Iterator[RopeParams]:
    """llama3, yarn and dynamic over the usual factors and original lengths (the stated ones
    when given)."""
    factors = sorted({*_FACTORS, *([params.factor] if params.factor else [])})
    originals = (
        (params.original_max_position_embeddings,)
        if params.original_max_position_embeddings
        else _ORIGINALS
    )
    for scaling in ("llama3", "yarn", "dynamic"):
        if scaling == "dynamic" and params.d_model < 4:
            continue
        for base in bases:
            for original in originals:
                for factor in factors:
                    yield _with(
                        params,
                        scaling=scaling,
                        base=base,
                        factor=factor,
                        original_max_position_embeddings=original,
                    )


def _valid(candidates: Iterator[RopeParams]) -> Iterator[RopeParams]:
    """The candidates that are valid parameters (a fitted factor may fall out of range)."""
    while True:
        try:
            yield next(candidates)
        except StopIteration:
            return
        except ParameterError:
            continue


def _changes(stated: RopeParams, candidate: RopeParams) -> int:
    scaling = (
        candidate.scaling != stated.scaling
        or candidate.factor != stated.factor
        or candidate.original_max_position_embeddings != stated.original_max_position_embeddings
    )
    return int(candidate.base != stated.base) + int(scaling)


def _rounded(
    params: RopeParams, reading: Reading, usable: npt.NDArray[np.bool_], length: int
) -> RopeParams:
    """Fitted base and factor with the fewest digits that still fit the readings."""

    def fits(candidate: RopeParams) -> bool:
        return _misfit(reading, usable, _spectrum(candidate, length)) <= 1

    base = _shortest(params.base, lambda b: 1.0 < b <= 1e12 and fits(replace(params, base=b)))
    params = replace(params, base=base)
    if params.factor is not None:
        factor = _shortest(params.factor, lambda f: f > 0 and fits(replace(params, factor=f)))
        params = replace(params, factor=factor)
    return params


def _spectrum_findings(
    stated: RopeParams, fitted: RopeParams, usable: npt.NDArray[np.bool_]
) -> list[Finding]:
    findings = []
    pairs = np.flatnonzero(usable)
    where = {"pairs_read": [int(pairs[0]), int(pairs[-1])], "pairs_count": len(pairs)}
    if fitted.base != stated.base:
        # An unscaled base that makes the head wider is a partial rotary, not another base.
        findings.append(
            wider_head(stated, fitted, where)
            or Finding(
                "base_mismatch",
                f"the frequencies fit base {fitted.base:g}, not the stated {stated.base:g}",
                {"fitted_base": fitted.base, "stated_base": stated.base, **where},
            )
        )
    if _changes(replace(stated, base=fitted.base), fitted):
        described = _describe(fitted)
        findings.append(
            Finding(
                "scaling_mismatch",
                f"the frequencies fit {described}, not the stated {_describe(stated)}",
                {
                    "fitted_scaling": fitted.scaling,
                    "fitted_factor": fitted.factor,
                    "fitted_original_max_position_embeddings": (
                        fitted.original_max_position_embeddings
                    ),
                    "stated_scaling": stated.scaling,
                    "stated_factor": stated.factor,
                    **where,
                },
            )
        )
    return findings


def _describe(params: RopeParams) -> str:
    if params.scaling == "none":
        return "no scaling"
    text = f"{params.scaling} scaling with factor {params.factor:g}"
    if params.original_max_position_embeddings and params.scaling != "linear":
        text += f" over {params.original_max_position_embeddings} original positions"
    return text
