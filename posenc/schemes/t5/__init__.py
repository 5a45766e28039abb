"""``t5``: Raffel et al. 2020, relative position buckets."""

from __future__ import annotations

from posenc import adapters
from posenc.declare import Scheme
from posenc.schemes.t5 import maths, verify

declaration = Scheme(
    "t5",
    "Raffel et al. 2020: relative position buckets, int32",
    maths.T5Params,
    maths.shape,
    maths.encode,
    maths.cost,
    verify.verify_t5,
    verify.verify_t5_cost,
    examples=({}, {"num_buckets": 8, "max_distance": 20, "bidirectional": False}),
    conformance=adapters.conformance_of(maths.encode),
    conformance_cost=adapters.conformance_cost_of(maths.cost),
    dtypes=None,
)
