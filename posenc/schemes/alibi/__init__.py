"""``alibi``: Press et al. 2022, a linear bias ``-m_h·|i − j|`` per head."""

from __future__ import annotations

from posenc import adapters
from posenc.declare import Scheme
from posenc.schemes.alibi import maths, verify

declaration = Scheme(
    "alibi",
    "Press et al. 2022: a linear bias -m_h·|i − j| per head",
    maths.AlibiParams,
    maths.shape,
    maths.encode,
    maths.cost,
    verify.verify_alibi,
    verify.verify_alibi_cost,
    examples=({"num_heads": 4}, {"num_heads": 6}),
    conformance=adapters.conformance_of(maths.encode),
    conformance_cost=adapters.conformance_cost_of(maths.cost),
    components=maths.COMPONENTS,
    magnitude=maths.magnitude,
)
