"""Assertions for the test suite of a port, in the style of ``numpy.testing``: no server, no torch.

:func:`assert_rope_matches` holds a rotary cache to the rope a model's ``config.json`` states
(or to explicit parameters), :func:`assert_table_matches` any scheme's array to its parameters.
Both raise :class:`AssertionError` whose message is the diagnosis that ``POST
/v1/{scheme}/verify`` would give: the first bad position, the largest error in ulps, and each
finding with its evidence. :func:`conformance` returns that answer itself, as a dict.
:func:`assert_rope_applied` holds a kernel's input and output (q or k before and after its rope)
to the model's rope, as ``POST /v1/rope/applied`` does; :func:`rope_applied` returns its answer.

>>> import numpy as np
>>> from posenc.registry import get
>>> cache = get("rope").table(get("rope").params(d_model=8), 16, 0, "float32", "cos_sin")
>>> assert_rope_matches(cache, d_model=8)
>>> assert_rope_matches(cache, d_model=8, base=500000.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
AssertionError: does not conform to rope d_model=8 base=500000 layout=split ... tolerance 1 ulp)
  max error 0.7743 = 2.928e+08 ulps of float32, first bad position 1
  base_mismatch: the frequencies fit base 10000, not the stated 500000
      fitted_base=10000, stated_base=500000, ...
"""

from posenc.testing.kernels import applied_text, assert_rope_applied, rope_applied
from posenc.testing.tables import (
    assert_rope_matches,
    assert_table_matches,
    conformance,
    report_text,
)

__all__ = [
    "applied_text",
    "assert_rope_applied",
    "assert_rope_matches",
    "assert_table_matches",
    "conformance",
    "report_text",
    "rope_applied",
]
