"""``POST /v1/{scheme}/encode`` with ``position_ids``: a token turned by several ids at once (a
multimodal rotary embedding's temporal, height and width ids), under the options the scheme declares
(:class:`posenc.declare.Ids`). The table alone: embeddings and vectors go with ``positions``."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import Request, Response

from app import bodies, formats
from app.admission import check_size
from app.models import Format, body_members, component_of, dtype_of, params_of
from app.serving import check_holdable, send_array, state
from posenc.declare import Ids, Scheme
from posenc.errors import InconsistentError, NotApplicableError


async def encode_ids(
    request: Request,
    scheme: Scheme,
    small: dict[str, Any],
    given: npt.NDArray[np.float64],
    arrays: dict[str, npt.NDArray[Any] | None],
    fmt_given: Format | None,
) -> Response:
    """The table at the ids ``given`` (the body's ``position_ids``); ``arrays`` are the body's
    other arrays, refused beside them."""
    declared = _declared(scheme, arrays)
    settings, _ = state(request)
    ids = _ids_of(given, declared.rows, settings.max_positions)
    members = body_members(scheme, {**small, "position_ids": [[0]] * declared.rows})
    params = params_of(scheme, members)
    dtype, component = dtype_of(scheme, members), component_of(scheme, members)
    options = declared.read(params, small.get(declared.key), component)
    fmt = formats.negotiate(fmt_given, request.headers.get("accept"))
    shape = scheme.shape(params, ids.shape[1], component)
    cost = declared.cost(params, ids.shape[1], dtype, component)
    listed = {"position_ids": ids.tolist(), declared.key: options.describe()}

    def make() -> npt.NDArray[Any]:
        check_holdable(scheme, params, int(ids.min()), int(ids.max()), dtype, component)
        return declared.encode(params, ids, options, dtype, component)

    return await send_array(
        request, scheme, members, params, fmt, shape, cost, "position_ids", listed, make
    )


def _declared(scheme: Scheme, arrays: dict[str, npt.NDArray[Any] | None]) -> Ids:
    """The scheme's several ids a token, refused where it has none or the body mixes them with
    what goes with one position a token."""
    if scheme.ids is None:
        raise NotApplicableError("position_ids", scheme.name, "a token has one position here")
    for other in ("positions", "embeddings", "vectors"):
        if arrays.get(other) is not None:
            raise InconsistentError(
                other, "position_ids give the table alone: send positions, not both"
            )
    return scheme.ids


def _ids_of(values: npt.NDArray[np.float64], rows: int, limit: int) -> npt.NDArray[np.int64]:
    """``rows`` rows of ids, each an integer in 0 … 2^31 − 1 (``3.0`` is 3)."""
    check_size("position_ids", "the position ids", values.size, limit, "POSENC_MAX_POSITIONS")
    if values.shape[0] != rows:
        raise bodies.invalid(
            ("position_ids",), f"must hold {rows} rows (a token's ids), got {values.shape[0]}"
        )
    return np.stack(
        [bodies.positions_of(row, ("position_ids", index)) for index, row in enumerate(values)]
    )
