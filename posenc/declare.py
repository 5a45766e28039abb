"""How a scheme declares itself, once: its parameters and everything it offers.

A scheme's parameters are a frozen dataclass whose fields carry a :class:`Spec` (made with
:func:`param`): the doc string and the range. From that one declaration come the range checks
here (:func:`check_ranges`), ``/v1/schemes``, and the HTTP layer's per-scheme query models, so
the OpenAPI document states exactly what each scheme takes. Rules that tie one parameter to
another (``d_model`` even for rope, say) stay in the dataclass's ``__post_init__`` and in the
parameter's doc string.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Toy:
...     width: int = param(doc="how wide", ge=1, le=8)
...     def __post_init__(self) -> None:
...         check_ranges(self)
>>> Toy(width=9)
Traceback (most recent call last):
...
posenc.errors.ParameterError: width: must be ≤ 8, got 9
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from posenc.conformance import Conformance
from posenc.cost import Cost
from posenc.errors import InconsistentError, ParameterError
from posenc.verify import Report

Positions = npt.NDArray[np.int64]
Array = npt.NDArray[Any]
FLOAT_DTYPES = ("float32", "float64", "float16")


class Table(Protocol):
    """A scheme's table of consecutive positions; ``finished(out, rows)``, where given, is told
    (from the computing thread) once rows ``[0, rows)`` of ``out`` (planes, rows, columns) are
    final: ``out`` holds the answer's bytes, and is never written there again."""

    def __call__(
        self,
        params: Any,
        count: int,
        offset: int,
        dtype: str,
        component: str,
        /,
        *,
        finished: Callable[[Array, int], None] | None = None,
    ) -> Array: ...


@dataclass(frozen=True)
class Spec:
    """What a parameter means and which values it takes (inclusive unless ``gt``/``lt``)."""

    doc: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    multiple_of: int | None = None
    min_items: int | None = None
    max_items: int | None = None


def param(default: Any = dataclasses.MISSING, *, doc: str, **limits: Any) -> Any:
    """A dataclass field with its :class:`Spec`; no default means the parameter is required."""
    return field(default=default, metadata={"spec": Spec(doc, **limits)})


def spec(f: dataclasses.Field[Any]) -> Spec:
    found: Spec = f.metadata["spec"]
    return found


@cache
def hints(params_type: Any) -> dict[str, Any]:
    """The resolved type of every field of a parameters dataclass."""
    return typing.get_type_hints(params_type)


def choices(hint: Any) -> tuple[str, ...] | None:
    """The allowed strings of a ``Literal`` (or ``Literal | None``) type, else None."""
    for option in (hint, *typing.get_args(hint)):
        if typing.get_origin(option) is Literal:
            return tuple(typing.get_args(option))
    return None


@cache
def _ranges(params_type: Any) -> tuple[tuple[str, tuple[str, ...] | None, Spec], ...]:
    """Each field's name, allowed strings and :class:`Spec`: read once per parameters type,
    since every request builds its parameters and checks them."""
    types = hints(params_type)
    return tuple((f.name, choices(types[f.name]), spec(f)) for f in dataclasses.fields(params_type))


def check_ranges(params: Any) -> None:
    """Refuse any field outside its :class:`Spec`, naming it: the single place ranges are
    enforced in the core (the HTTP layer states the same ranges in its schema)."""
    for name, allowed, s in _ranges(type(params)):  # type: ignore[arg-type]
        value = getattr(params, name)
        if value is None:
            continue
        if allowed is not None and value not in allowed:
            raise ParameterError(name, f"must be one of {', '.join(allowed)}, got {value!r}")
        values = value if isinstance(value, tuple) else (value,)
        if isinstance(value, tuple):
            if s.min_items is not None and len(value) < s.min_items:
                raise ParameterError(name, f"must list at least {s.min_items}, got {len(value)}")
            if s.max_items is not None and len(value) > s.max_items:
                raise ParameterError(name, f"must list at most {s.max_items}, got {len(value)}")
        for v in values:
            _check_one(name, v, s)


def _check_one(name: str, value: Any, s: Spec) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError(name, f"must be a finite number, got {value!r}")
    failed = (
        (s.ge, s.ge is not None and value < s.ge, "≥"),
        (s.gt, s.gt is not None and value <= s.gt, ">"),
        (s.le, s.le is not None and value > s.le, "≤"),
        (s.lt, s.lt is not None and value >= s.lt, "<"),
    )
    for bound, broken, word in failed:
        if broken:
            raise ParameterError(name, f"must be {word} {bound:g}, got {value!r}")
    if s.multiple_of is not None and value % s.multiple_of:
        what = "even" if s.multiple_of == 2 else f"a multiple of {s.multiple_of}"
        raise ParameterError(name, f"must be {what}, got {value!r}")


@dataclass(frozen=True)
class Limits:
    """What the service answers at most in one request, so that an operation that hands out
    URLs hands out servable ones: values in one array, units of work, bytes of memory."""

    max_values: int
    max_work: int
    max_bytes: int
    # The longest file prefix an extra that takes a file (``Extra.binary``) reads.
    max_upload_bytes: int = 64 * 2**20


@dataclass(frozen=True)
class Sized:
    """What an extra operation's answer will cost, from its body alone: ``values`` the answer
    holds, and the body field ``param`` that sized it (named when refused)."""

    cost: Cost
    values: int
    param: str


@dataclass(frozen=True)
class QueryParam:
    """A query parameter of an extra operation: its name, the JSON Schema of its value (an
    integer, a number, a string, a boolean, or an array of numbers written comma-separated),
    and what it means."""

    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True)
class FileParam:
    """A part of a multipart/form-data body that an extra takes as bytes (an array, a file, a
    range of one), handed over with its own headers: its name, what it holds, whether it must
    be sent, and whether it may be sent many times (each then named by its filename)."""

    name: str
    description: str
    required: bool = False
    repeats: bool = False


@dataclass(frozen=True)
class Part:
    """A part's bytes as sent, its own headers (names in lower case) and its filename."""

    data: bytes | bytearray | memoryview
    headers: Mapping[str, str] = field(default_factory=dict)
    filename: str | None = None


@dataclass(frozen=True)
class Upload:
    """What an extra that takes a file (``Extra.binary``) is given: the file's first bytes as
    sent, and its query parameters that were given."""

    data: bytes | bytearray | memoryview
    query: dict[str, Any]
    # The JSON parts of a multipart/form-data body (Extra.parts), parsed.
    parts: dict[str, Any] = field(default_factory=dict)
    # The byte parts (Extra.files) that were sent, by name, in the order sent: one each, but
    # for a part that repeats.
    files: Mapping[str, tuple[Part, ...]] = field(default_factory=dict)

    def file(self, name: str) -> Part | None:
        """The byte part ``name`` (one that does not repeat), if it was sent."""
        sent = self.files.get(name)
        return sent[0] if sent else None


@dataclass(frozen=True)
class Extra:
    """An operation of one scheme beyond the common four: ``POST /v1/{scheme}/{name}`` with a
    JSON body of at most ``max_body_bytes``, answered with the JSON ``handle(body, limits)``
    returns; the service's :class:`Limits` let an answer link only to what it will serve."""

    name: str
    summary: str
    handle: Callable[[Any, Limits], dict[str, Any]]
    # JSON Schema keywords of the body and the answer (properties, examples), for the document.
    body_schema: dict[str, Any] = field(default_factory=dict)
    answer_schema: dict[str, Any] = field(default_factory=dict)
    max_body_bytes: int = 2**20
    # What an answer whose size the body sets will cost; None: small and bounded by the body.
    size: Callable[[Any, Limits], Sized] | None = None
    # The answer as one array, for ``format=npy``, with headers for what the array leaves out;
    # None: JSON only (and no query parameter at all).
    array: Callable[[Any, Limits], tuple[Array, dict[str, str]]] | None = None
    # True: the body is a file's first bytes (application/octet-stream, at most
    # Limits.max_upload_bytes) and handle and size get an Upload; False: a JSON document.
    binary: bool = False
    query: tuple[QueryParam, ...] = ()
    # With binary: the JSON parts a multipart/form-data body may hold beside the file, whose
    # part is named as the extra.
    parts: tuple[str, ...] = ()
    # With binary: parts of bytes, each with its own headers, in place of the one file: the
    # body is then multipart/form-data only, and no part is named as the extra.
    files: tuple[FileParam, ...] = ()
    # With binary: what a 422 says of a body that stops short of what is read: "prefix", the
    # bytes from the file's start to send (needed_bytes); "external", the byte ranges of the
    # files it refers to (needed); None, neither can happen.
    incomplete: Literal["prefix", "external"] | None = None


@dataclass(frozen=True)
class Ids:
    """``POST /v1/{scheme}/encode`` with ``position_ids`` in place of ``positions``: each token
    turned by ``rows`` ids at once (a multimodal rope's temporal, height and width ids), under
    options in the body member ``key`` (its JSON Schema ``schema``) that say which frequency
    turns by which id. ``read(params, member, component)`` checks them, ``encode(params, ids,
    options, dtype, component)`` gives the array for ``(rows, n)`` ids, ``cost(params, n,
    dtype, component)`` what that costs."""

    rows: int
    key: str
    schema: dict[str, Any]
    read: Callable[[Any, Any, str], Any]
    encode: Callable[[Any, Positions, Any, str, str], Array]
    cost: Callable[[Any, int, str, str], Cost]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per scheme
class Scheme:
    """Everything a scheme offers, declared once; the registry lists these and nothing else.

    ``encode(params, positions, dtype, component)`` is the array for listed positions (grid
    cells when ``rows == "grid"``), ``table(params, count, offset, dtype, component)`` the same
    for consecutive ones where a faster path exists; ``shape`` and ``cost`` say what either will
    be and hold before anything is computed. ``vectors`` gives the float64 per-position vectors
    that ``/similarity`` compares (None: the scheme offers no similarity), ``conformance`` the
    diagnosis of a client's array (None: no ``POST /verify``). ``dtypes`` None means the array
    is int32 and ``dtype`` does not apply. ``examples`` are small valid parameter sets, for the
    documentation and the contract tests.
    """

    name: str
    summary: str
    params: type
    shape: Callable[[Any, int, str], tuple[int, ...]]
    encode: Callable[[Any, Positions, str, str], Array]
    cost: Callable[[Any, int, str, str], Cost]
    verify: Callable[[Any, Array, Positions], Report]
    verify_cost: Callable[[Any, int], Cost]
    examples: tuple[dict[str, Any], ...]
    table: Table | None = None
    vectors: Callable[[Any, Positions, tuple[float, ...] | None], Array] | None = None
    conformance: Callable[[Any, Array, str, int, float], Conformance] | None = None
    conformance_cost: Callable[[Any, int, str], Cost] | None = None
    components: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = FLOAT_DTYPES
    rows: Literal["positions", "grid"] = "positions"
    # ``rotate(params, vectors, positions)``: POST /encode rotates given vectors, and
    # /similarity may take the vector to rotate.
    rotate: Callable[[Any, Array, Positions], Array] | None = None
    extras: tuple[Extra, ...] = ()
    # ``magnitude(params, first, last, component)``: the largest |value| of the array for
    # positions first … last, from the parameters alone, so that a dtype that cannot hold it is
    # refused before anything is computed. None: the answer's values are checked instead.
    magnitude: Callable[[Any, int, int, str], float] | None = None
    # POST /encode may take several ids a token (position_ids) instead of positions.
    ids: Ids | None = None
    # Compiled loops no table of the examples reaches (an extra's readers, a recipe's path the
    # examples do not take), each compiled by calling it once: posenc.warm calls them all.
    loops: tuple[Callable[[], None], ...] = ()

    @property
    def rotates(self) -> bool:
        return self.rotate is not None

    @property
    def endpoints(self) -> tuple[str, ...]:
        offered = ["table", "encode"]
        if self.vectors is not None:
            offered.append("similarity")
        offered.append("verify")
        if self.conformance is not None:
            offered.append("conformance")
        return (*offered, *(extra.name for extra in self.extras))

    def follows_rows(self, params: Any, component: str) -> bool:
        """Whether the array grows with its rows. One that does not (rope's ``inv_freq``,
        ALiBi's ``slopes``) depends on the rows through their last position alone (the sequence
        length that sets dynamic scaling), so it is computed from that one position: a
        ``seq_len`` of 2^31 costs it nothing (tests/core/test_scheme_contract.py holds every
        scheme to this)."""
        return self.shape(params, 1, component) != self.shape(params, 2, component)

    def rows_in(self, params: Any, shape: tuple[int, ...], component: str) -> int:
        """How many positions an array of ``shape`` covers: the length of the axis that grows
        with the count (one position when no axis does, or the rank differs)."""
        one, two = self.shape(params, 1, component), self.shape(params, 2, component)
        growing = [axis for axis, (a, b) in enumerate(zip(one, two, strict=True)) if a != b]
        if not growing or len(one) != len(shape):
            return 1
        return int(shape[growing[0]])

    def conforms(
        self, params: Any, array: Array, component: str, offset: int, tolerance_ulp: float
    ) -> tuple[bool, Conformance]:
        """A client's array (of the shape these parameters give) against the served one, and
        whether it conforms: within ``tolerance_ulp`` everywhere, or equal for integers. The
        one rule behind ``POST /verify``, ``posenc check`` and ``posenc.testing``."""
        assert self.conformance is not None, "only for schemes that declare a conformance check"
        count = self.rows_in(params, array.shape, component)
        why = self.unholdable(params, offset, offset + count - 1, str(array.dtype), component)
        if why:  # its ulps would be measured against infinities
            raise InconsistentError("dtype", f"{why}: no table in it can conform")
        result = self.conformance(params, array, component, offset, tolerance_ulp)
        if np.issubdtype(array.dtype, np.integer):
            return result.max_abs_error == 0, result
        return result.max_ulp_error <= tolerance_ulp, result

    def unholdable(self, params: Any, first: int, last: int, dtype: str, component: str) -> str:
        """Why ``dtype`` cannot hold the array for positions first … last ("" when it can).

        Only float16 can fail: every scheme's values stay below 2^47 (a position below 2^31
        times a frequency of at most 2^16, rope's smallest divisor being 2^-16), far inside
        float32 and float64."""
        if dtype != "float16" or self.magnitude is None:
            return ""
        largest = self.magnitude(params, first, last, component)
        # float16 rounds to infinity from 65520 up (65504 and half its last step of 32).
        if largest < 65520:
            return ""
        return f"float16 cannot hold these values (up to {largest:.6g}, beyond ±65504)"

    def fields(self) -> Sequence[dataclasses.Field[Any]]:
        return dataclasses.fields(self.params)
