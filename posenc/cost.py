"""What an answer will cost, known from its parameters alone, before anything is computed.

``bytes`` is the peak of working memory the computation may hold at once (arrays, temporaries,
the serialised body); ``work`` counts element operations, where one unit is one float64 element
visited once by a vectorised NumPy operation (about a nanosecond on one core here). Costs are
upper bounds: a test measures the real peak of every operation and holds it under the model.

>>> Cost(100, 10) + Cost(50, 5)
Cost(bytes=150, work=15)
>>> Cost(100, 10).peak(Cost(50, 5))
Cost(bytes=100, work=15)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Cost:
    bytes: int
    work: int

    def __add__(self, other: Cost) -> Cost:
        """Both held at once, both done."""
        return Cost(self.bytes + other.bytes, self.work + other.work)

    def peak(self, other: Cost) -> Cost:
        """One after the other: the larger peak, both done."""
        return Cost(max(self.bytes, other.bytes), self.work + other.work)


FREE = Cost(0, 0)
