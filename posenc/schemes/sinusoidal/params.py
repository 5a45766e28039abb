"""The sinusoid's parameters: one frozen dataclass, its ranges and its column layout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy.typing as npt

from posenc.declare import check_ranges, param
from posenc.errors import InconsistentError
from posenc.numerics.exact import MAX_POSITION
from posenc.numerics.float32 import Recipe

Layout = Literal["interleaved", "split"]
Convention = Literal["vaswani", "tensor2tensor", "fairseq"]
DType = Literal["float32", "float64", "float16"]

MAX_D_MODEL = 65536
MAX_BASE = 1e12


@dataclass(frozen=True)
class SinusoidalParams:
    """Parameters of the sinusoidal scheme; hashable, so they key caches and ETags.

    ``convention`` picks the library whose table to reproduce: ``vaswani`` (the paper, any
    ``layout``), ``tensor2tensor`` (``h = d_model // 2`` timescales spaced
    ``log(base)/(h−1)``, sines then cosines, a zero column for odd ``d_model``) or ``fairseq``
    (the same table, with the row at ``padding_idx`` zero). Those two fix the layout.
    """

    d_model: int = param(doc="width of the encoding; odd values are valid", ge=1, le=MAX_D_MODEL)
    base: float = param(10000.0, doc="the paper's 10000; 1 < base ≤ 1e12", gt=1, le=MAX_BASE)
    layout: Layout | None = param(
        None,
        doc="interleaved: sin, cos, sin, cos … (the default of vaswani); split: all sines, then "
        "all cosines. tensor2tensor and fairseq fix it (sines, then cosines): leave it out",
    )
    convention: Convention = param(
        "vaswani",
        doc="whose table: vaswani (the paper), tensor2tensor or fairseq (timescales spaced "
        "log(base)/(h−1), sines then cosines; fairseq zeroes the row at padding_idx)",
    )
    padding_idx: int | None = param(
        None, doc="fairseq only: this position's row is zero (default 1)", ge=0, le=MAX_POSITION
    )
    recipe: Recipe = param(
        "exact",
        doc="exact: correctly rounded; framework: the library's own float32 computation",
    )

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.convention != "vaswani" and self.d_model < 2:
            raise InconsistentError(
                "d_model",
                f"must be ≥ 2 for convention={self.convention}: one column holds no frequency",
            )
        if self.convention == "vaswani":
            object.__setattr__(self, "layout", self.layout or "interleaved")
        elif self.layout is not None:
            raise InconsistentError(
                "layout", f"is fixed by convention={self.convention}: sines, then cosines"
            )
        if self.convention == "fairseq":
            object.__setattr__(
                self, "padding_idx", 1 if self.padding_idx is None else self.padding_idx
            )
        elif self.padding_idx is not None:
            raise InconsistentError("padding_idx", "applies only to convention=fairseq")

    @property
    def frequency_count(self) -> int:
        if self.convention == "vaswani":
            return (self.d_model + 1) // 2
        return self.d_model // 2

    def column_views(self, out: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """Views of ``out`` holding the sines (every frequency) and the cosines (those that have
        one, the first ``d_model // 2``)."""
        h = self.frequency_count
        if self.layout == "interleaved":
            return out[:, 0::2], out[:, 1::2]
        return out[:, :h], out[:, h : h + self.d_model // 2]
