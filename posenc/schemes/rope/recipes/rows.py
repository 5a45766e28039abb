"""What a runtime's recipe prepares once per table: a function from positions to the cos, sin
and angle of each pair, ``(n, d/2)`` float32 each, as the runtime computes them. Preparing
derives the runtime's parameters (and refuses a rope it does not implement) before any row is
computed or any output allocated."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from posenc.numerics.float32 import Float32Array

Halves = tuple[Float32Array, Float32Array, Float32Array]
Rows = Callable[[npt.NDArray[np.int64]], Halves]
