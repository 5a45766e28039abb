"""``POST /v1/rope/applied``'s answer: whether a kernel applied the model's rope, read from what
went into it and what came out.

The order: the expected rope (:mod:`.expected`); the arrays, checked (:mod:`.reader`,
:mod:`.measure`); the pairing that keeps lengths and the columns that moved
(:mod:`.structure`); every cell's rotation under that pairing, held to the model's rope as each
recipe computes it (:mod:`.angles`); where none holds, the faults that explain the cells
(:mod:`.faults`). ``holds`` is None, with a ``reason``, where the data cannot decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.conformance import Finding
from posenc.declare import Part
from posenc.errors import InconsistentError
from posenc.schemes.rope.applied import expected as expected_rope
from posenc.schemes.rope.applied import faults, loops, measure, reader, report, structure, table
from posenc.schemes.rope.applied.angles import (
    RECIPES,
    Fit,
    Turning,
    closest,
    every_recipe,
    rotations,
)
from posenc.schemes.rope.applied.expected import Expected
from posenc.schemes.rope.applied.measure import Data


def answer(
    before: Part,
    after: Part,
    positions: Part | None,
    config: Any,
    query: Mapping[str, Any],
) -> dict[str, Any]:
    """The answer for the parts and query of one request (``config`` None: no config part)."""
    before_given = reader.read(before, "before", reader.FLOATS)
    after_given = reader.read(after, "after", reader.FLOATS)
    ids = None
    if positions is not None:
        ids = reader.read(positions, "positions", reader.INTEGERS).values
    return of_given(before_given, after_given, ids, config, query)


def of_given(
    before: reader.Given,
    after: reader.Given,
    positions: npt.NDArray[Any] | None,
    config: Any,
    query: Mapping[str, Any],
) -> dict[str, Any]:
    """:func:`answer` for arrays in hand (``posenc.testing``): the arrays are checked first,
    then the rope they are held to."""
    given = measure.data(before, after, int(query.get("token_axis", 0)), query.get("head_dim"))
    ids = reader.positions(positions, given.tokens, int(query.get("offset", 0)))
    return of_arrays(_expected(config, query), given, ids, config is None)


def _expected(config: Any, query: Mapping[str, Any]) -> Expected:
    if config is not None:
        return expected_rope.from_config(config, query)
    if "layer" in query:
        raise InconsistentError("layer", "names a layer of the config part, which is missing")
    return expected_rope.from_query(query)


def of_arrays(
    expected: Expected, given: Data, ids: npt.NDArray[np.int64], stated: bool
) -> dict[str, Any]:
    """The answer for checked arrays and ids (``stated``: the rope came in the query)."""
    ids = ids[None] if ids.ndim == 1 else ids
    if len(ids) == 3 and expected.mrope is None:
        raise InconsistentError(
            "positions", "(3, n) ids are M-RoPE's: they need a config part of a multimodal model"
        )
    end = expected.rotary_offset + expected.width
    if end > given.head:
        raise InconsistentError(
            "d_model" if stated else "config",
            f"the rope turns dimensions {expected.rotary_offset} … {end - 1}, past a head of "
            f"{given.head} (set head_dim where the last axis holds several heads)",
        )
    measure.check_values(given.before, "before")
    measure.check_values(given.after, "after")
    return _analysed(expected, given, ids)


@dataclass(frozen=True)
class _Verdict:
    holds: bool | None
    reason: str | None
    recipe: str | None
    also: list[str]
    reference: Fit | None


def _analysed(expected: Expected, given: Data, ids: npt.NDArray[np.int64]) -> dict[str, Any]:
    read = structure.read(given, expected)
    if expected.params is None:
        holds = not read.moved_outside
        return report.document(expected, given, ids, read, None, None, read.findings, holds)
    narrowed = None
    if read.pairing is None:
        narrowed = table.narrower(given, expected, read)
        if narrowed is None:
            return report.document(expected, given, ids, read, None, None, read.findings, False)
        given, read = narrowed
    stats = measure.cells(given, read.columns)
    stated = Turning(expected.params, times=-1 if expected.reversed else 1)
    fits = every_recipe(stats, stated, ids, expected.id_rows())
    verdict = _verdict(expected, read, stats, fits)
    findings = list(read.findings)
    if verdict.holds is False:
        findings.extend(_diagnosis(expected, stats, ids, stated, fits, given.head))
    elif narrowed is not None and verdict.holds is True:
        # The model's rope to the table's resolution: not to the data's.
        verdict = replace(verdict, holds=False)
    return report.document(
        expected,
        given,
        ids,
        read,
        stats,
        report.Measured(verdict.recipe, verdict.also, verdict.reference, fits),
        findings,
        verdict.holds,
        verdict.reason,
    )


def _verdict(
    expected: Expected,
    read: structure.Structure,
    stats: npt.NDArray[np.float64],
    fits: dict[str, Fit | str],
) -> _Verdict:
    """Whether the kernel applied ``expected``: the pairing, the dimensions and one recipe's
    rotations at every cell; None where nothing was read, or no rotation at all fits too."""
    recipe, also = closest(fits)
    holding = recipe is not None
    # Where no recipe holds whole, the one whose angles hold (its magnitudes do not) is named.
    recipe = recipe or faults.angles_hold(fits)
    reference = fits[recipe or "exact"]
    assert isinstance(reference, Fit)
    if not (stats[loops.READ] > 0).any():
        nothing = "before holds no nonzero pair: no rotation can be read"
        return _Verdict(None, nothing, None, [], None)
    kept = measure.lengths(stats).kept
    if kept < structure.KEEP:
        return _Verdict(False, None, None, [], reference)
    right = holding and read.pairing == structure.expected_pairing(expected)
    holds = right and not read.moved_outside
    if holds and structure.still_pairs(stats).all():  # no rotation at all fits as well
        return _Verdict(
            None,
            "every pair's rotation at these positions is within the resolution of none at "
            "all: send later positions (or a wider dtype) to tell the rope from no rope",
            recipe,
            also,
            reference,
        )
    return _Verdict(holds, None, recipe, also, reference)


def _diagnosis(
    expected: Expected,
    stats: npt.NDArray[np.float64],
    ids: npt.NDArray[np.int64],
    stated: Turning,
    fits: dict[str, Fit | str],
    head: int,
) -> list[Finding]:
    if measure.lengths(stats).kept < structure.KEEP:
        return [_partly_not_a_rotation(stats)]
    id_rows = expected.id_rows()
    still = structure.still_pairs(stats)
    exact = fits["exact"]
    assert isinstance(exact, Fit)
    should_turn = ~exact.angle_ok.all(axis=0)
    left = np.flatnonzero(still & should_turn)
    findings: list[Finding] = []
    turning = np.flatnonzero(~still) if len(left) else np.arange(len(still))
    if len(left):
        findings.append(structure.left_still(expected, left, len(turning)))
    cells = faults.Cells(stats, ids, id_rows, turning, head)
    section = faults.sections(cells, stated, id_rows)
    if section is not None:
        return [*findings, section]
    stated_fits = faults.of_pairs(fits, turning)
    recipe = faults.angles_hold(stated_fits)
    if recipe is not None:
        found = stated_fits[recipe]
        assert isinstance(found, Fit)
        return [*findings, *_magnitude(found, stats, recipe, stated, ids, id_rows)]
    explained = faults.explain(cells, stated)
    if explained is not None:
        fit, recipe = explained.fit, explained.recipe
        magnitude = _magnitude(fit, stats, recipe, explained.turning, ids, id_rows)
        evidence = {"recipe": recipe, "max_angle_error_as_fitted": fit.max_error}
        named = [Finding(f.name, f.summary, {**f.evidence, **evidence}) for f in explained.findings]
        return [*findings, *named, *magnitude]
    exact_cells = stated_fits["exact"]
    assert isinstance(exact_cells, Fit)
    # Rows that repeat are what rounded angles show, once the positions were not rounded.
    described = faults.precision(cells, stated.params, exact_cells) or faults.collapsed(
        cells, exact_cells
    )
    return [*findings, described or _unexplained(exact_cells)]


def _magnitude(
    fit: Fit,
    stats: npt.NDArray[np.float64],
    recipe: str,
    turning: Turning,
    ids: npt.NDArray[np.int64],
    id_rows: npt.NDArray[np.intp],
) -> list[Finding]:
    """``attention_factor_mismatch`` where the angles hold and the lengths do not."""
    if fit.ratio_ok.all():
        return []
    cos, sin = rotations(turning, recipe, ids, id_rows)
    expected = float(np.median(np.hypot(cos, sin)))
    fitted = measure.lengths(stats).magnitude or 0.0
    if abs(fitted - 1) < 1e-3 * max(expected, 1):
        why = "no attention factor was applied"
    elif abs(fitted - expected**2) < 1e-3 * expected**2:
        why = "the attention factor was applied twice"
    else:
        why = "every pair is scaled by another constant"
    return [
        Finding(
            "attention_factor_mismatch",
            f"the kernel scales every pair by {fitted:.6g}, not the attention factor "
            f"{expected:.6g}: {why}",
            {"fitted_factor": fitted, "expected_factor": expected, "ratio": fitted / expected},
        )
    ]


def _partly_not_a_rotation(stats: npt.NDArray[np.float64]) -> Finding:
    lengths = measure.lengths(stats)
    return Finding(
        "not_a_rotation",
        f"only {lengths.kept:.1%} of the cells keep one length: the kernel scales or mixes "
        "some pairs it should turn",
        {"lengths_kept": lengths.kept, "magnitude": lengths.magnitude},
    )


def _unexplained(exact: Fit) -> Finding:
    return Finding(
        "angles_mismatch",
        f"the angles differ from the model's rope by up to {exact.max_error:.3g} rad under "
        "every recipe, and no single fault explains them",
        {"max_angle_error": exact.max_error, "recipes": list(RECIPES)},
    )
