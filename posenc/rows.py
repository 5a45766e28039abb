"""Consecutive positions as two numbers until a request is admitted.

A query for ``seq_len=2000000000`` must be refused in microseconds, never holding two billion
integers: :class:`Rows` validates the range and says how many rows there are, and only
:meth:`Rows.array` allocates, after the request's cost has been admitted.

>>> rows = Rows(count=3, offset=5)
>>> len(rows), rows.array().tolist()
(3, [5, 6, 7])
>>> Rows(count=2_000_000_000, offset=2**30)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
posenc.errors.LimitError: seq_len: offset + seq_len must be ≤ 2^31 (positions below 2^31), ...
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from posenc.errors import LimitError, ParameterError
from posenc.numerics.exact import MAX_POSITION


@dataclass(frozen=True, slots=True)
class Rows:
    """Positions ``offset … offset+count-1``, all below 2^31, or the parameter named."""

    count: int
    offset: int = 0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ParameterError("seq_len", f"must be ≥ 1, got {self.count}")
        if not 0 <= self.offset <= MAX_POSITION:
            raise ParameterError("offset", f"must be in [0, 2^31), got {self.offset}")
        if self.offset + self.count - 1 > MAX_POSITION:
            raise LimitError(
                "seq_len",
                "offset + seq_len must be ≤ 2^31 (positions below 2^31), "
                f"got {self.offset + self.count}",
            )

    def __len__(self) -> int:
        return self.count

    @property
    def last(self) -> int:
        return self.offset + self.count - 1

    def array(self) -> npt.NDArray[np.int64]:
        return np.arange(self.offset, self.offset + self.count, dtype=np.int64)
