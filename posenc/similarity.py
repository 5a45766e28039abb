"""How alike two encodings are: cosine, dot product or Euclidean distance between rows, in float64.

>>> rows = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
>>> matrix(rows, "dot").tolist()
[[1.0, 0.0, 3.0], [0.0, 4.0, 8.0], [3.0, 8.0, 25.0]]
>>> against(rows, rows[2], "euclidean").tolist()
[4.47213595499958, 3.605551275463989, 0.0]
>>> against(rows, rows[0], "cosine").tolist()
[1.0, 0.0, 0.6]
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

Metric = Literal["cosine", "dot", "euclidean"]
Float64Array = npt.NDArray[np.float64]

# Below this share of the squared norms, |a|² + |b|² − 2a·b has lost too many digits to
# cancellation; such pairs are recomputed from their difference.
_CANCELLATION = 1e-6


def matrix(rows: npt.ArrayLike, metric: Metric) -> Float64Array:
    """``S[a, b] = metric(rows[a], rows[b])``, shape ``(n, n)``."""
    x = np.asarray(rows, dtype=np.float64)
    return _pairs(x, x, metric)


def between(queries: npt.ArrayLike, keys: npt.ArrayLike, metric: Metric) -> Float64Array:
    """``S[a, b] = metric(queries[a], keys[b])``, shape ``(n, m)``."""
    q = np.asarray(queries, dtype=np.float64)
    return _pairs(q, np.asarray(keys, dtype=np.float64), metric)


def against(rows: npt.ArrayLike, reference: npt.ArrayLike, metric: Metric) -> Float64Array:
    """``S[k] = metric(reference, rows[k])``, shape ``(n,)``."""
    x = np.asarray(rows, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)[None, :]
    result: Float64Array = _pairs(r, x, metric)[0]
    return result


def _pairs(a: Float64Array, b: Float64Array, metric: Metric) -> Float64Array:
    dots = a @ b.T
    if metric == "dot":
        return dots
    sq_a = np.einsum("ij,ij->i", a, a)
    sq_b = np.einsum("ij,ij->i", b, b)
    if metric == "cosine":
        norms = np.sqrt(np.outer(sq_a, sq_b))
        with np.errstate(invalid="ignore", divide="ignore"):
            cosine = dots / norms
        # A zero vector has no direction; 0 is the convention of scikit-learn and SciPy's users.
        clipped: Float64Array = np.clip(np.where(norms > 0, cosine, 0.0), -1.0, 1.0)
        return clipped
    squared = sq_a[:, None] + sq_b[None, :] - 2.0 * dots
    scale = sq_a[:, None] + sq_b[None, :]
    i, j = np.nonzero(squared <= _CANCELLATION * scale)
    diff = a[i] - b[j]
    squared[i, j] = np.einsum("ij,ij->i", diff, diff)
    distances: Float64Array = np.sqrt(np.maximum(squared, 0.0))
    return distances
