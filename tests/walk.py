"""Every declared operation of every scheme at the extremes its schema allows, as requests.

The matrix is read from the registry (operations, components, dtypes, parameter ranges, examples)
and from the app's OpenAPI document (which query parameters each operation takes), so a new
scheme or component is walked without an edit here. Each request is one of:

- the scheme's examples as they are, and with every numeric parameter they set (and every
  required one) at its schema maximum — the widest ``d_model``, the most heads, the largest grid;
- rows at both ends of the range: the longest table (``seq_len`` = 2^31) and the farthest one
  (``offset`` = 2^31 − 2), and listed positions near 2^31;
- every component × format × dtype the operation takes;
- an operation that reads a file: the largest files of the GGUF kind (a 64 MiB prefix, claims
  of 2^60 tokens and of the widest rope); one of parts of bytes (a kernel's arrays, an ONNX
  graph and its ranges) gets those files shared among its parts, which it refuses as what they
  are not. Its own extremes — the largest arrays, the costliest graphs — are held to its
  declared cost by its own tests (tests/applied/test_api.py, tests/onnx/test_reader.py).

What a correct service does with each is its own business (answer or refuse); what it must never
do is allocate what it did not declare, answer with a 5xx, or take long doing either.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import resource
import struct
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from app.main import create_app
from app.settings import Settings
from posenc.declare import Extra, Scheme, spec
from posenc.errors import PosencError
from posenc.numerics import kernels, rotation
from posenc.numerics.exact import MAX_POSITION
from posenc.registry import SCHEMES
from posenc.schemes.alibi import maths as alibi
from posenc.schemes.rope.scaling import scaled
from posenc.schemes.sinusoidal import maths as sinusoidal
from posenc.warm import compile_kernels
from tests.api.test_costs import PeakOfEachRequest

FORMATS = ("json", "npy", "bin", "csv", "plotly", "png")
METRICS = ("cosine", "dot", "euclidean")
LONGEST = {"seq_len": MAX_POSITION + 1, "offset": 0}
FARTHEST = {"seq_len": 2, "offset": MAX_POSITION - 1}
# Listed positions: the top of the range, and a spread over all of it (a GET's URL stays short).
FAR_POSITIONS = [MAX_POSITION, MAX_POSITION - 1, 0]
SPREAD_POSITIONS = list(range(MAX_POSITION, 0, -(2**21)))
BODY_POSITIONS = 65536  # POSENC_MAX_POSITIONS' default: the longest list a body may hold


@dataclass(frozen=True)
class Walked:
    """One request of the walk."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = field(default=())

    @property
    def url(self) -> str:
        return self.path + "?" + "&".join(f"{k}={v}" for k, v in self.query)

    def __str__(self) -> str:
        shown = self.url if len(self.url) < 300 else self.url[:297] + "..."
        extra = f" + {len(self.body)}-byte body" if self.body else ""
        return f"{self.method} {shown}{extra}"


def _widest(value: Any, limit: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_widest(v, limit) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    top = limit.le if limit.le is not None else limit.lt
    if top is None:
        return value
    if isinstance(value, int):
        top = int(top) - (1 if limit.le is None else 0)
        if limit.multiple_of:
            top -= top % limit.multiple_of
        return top
    return float(top)


def _narrowest(value: Any, limit: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_narrowest(v, limit) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if limit.ge is not None:
        return type(value)(limit.ge)
    if limit.gt is not None:
        return limit.gt + 1 if isinstance(value, int) else float(np.nextafter(limit.gt, np.inf))
    return value


def parameter_sets(scheme: Scheme) -> list[dict[str, Any]]:
    """The scheme's examples, and each with its numeric parameters (and every required one) at
    the schema's maximum, and at its minimum (a factor of 10^-300 once served cosines of
    10^270: the smallest values are extremes too)."""
    sets: list[dict[str, Any]] = []
    for example in scheme.examples:
        sets.append(dict(example))
        for extreme in (_widest, _narrowest):
            moved = dict(example)
            for f in scheme.fields():
                required = f.default is dataclasses.MISSING
                if f.name in example or required:
                    moved[f.name] = extreme(example.get(f.name, 1), spec(f))
            sets.append(moved)
    return sets


def _text(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


@cache
def _document() -> dict[str, Any]:
    from app.main import create_app

    document: dict[str, Any] = create_app().openapi()
    return document


def accepted(path: str, method: str) -> frozenset[str]:
    """The query parameters an operation takes, as the OpenAPI document states them."""
    operation = _document()["paths"][path][method.lower()]
    return frozenset(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")


def _query(path: str, method: str, values: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    taken = accepted(path, method)
    return tuple((k, _text(v)) for k, v in values.items() if k in taken and v is not None)


def _axes(scheme: Scheme, formats: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    components = scheme.components or (None,)
    dtypes = scheme.dtypes or (None,)
    for component, fmt, dtype in itertools.product(components, formats, dtypes):
        yield {"component": component, "format": fmt, "dtype": dtype}


def _rows(scheme: Scheme) -> tuple[dict[str, Any], ...]:
    return ({},) if scheme.rows == "grid" else (LONGEST, FARTHEST)


def requests(schemes: tuple[Scheme, ...] = SCHEMES) -> list[Walked]:
    walked: list[Walked] = []
    for scheme in schemes:
        walked += _of(scheme)
    return walked


def _of(scheme: Scheme) -> Iterator[Walked]:
    sets = parameter_sets(scheme)
    cycle = itertools.count()

    def params() -> dict[str, Any]:  # each request takes the next set: all are walked
        return sets[next(cycle) % len(sets)]

    prefix = f"/v1/{scheme.name}"
    for axes in _axes(scheme, FORMATS):
        for rows in _rows(scheme):
            path = f"{prefix}/table"
            yield Walked("GET", path, _query(path, "GET", {**params(), **rows, **axes}))
        for positions in (FAR_POSITIONS, SPREAD_POSITIONS):
            path = f"{prefix}/encode"
            values = {**params(), "positions": positions, **axes}
            yield Walked("GET", path, _query(path, "GET", values))
        if "similarity" in scheme.endpoints and axes["component"] in (None, *scheme.components[:1]):
            yield from _similarity(scheme, params, axes)
    for axes in _axes(scheme, ("json",)):
        for rows in _rows(scheme):
            path = f"{prefix}/verify"
            yield Walked("GET", path, _query(path, "GET", {**params(), **rows, **axes}))
        yield _encode_body(scheme, params(), axes)
        if "conformance" in scheme.endpoints:
            yield from _conformance(scheme, params(), axes)
    for extra in scheme.extras:
        if extra.files:  # parts of bytes: each of the files, shared among them, beside the parts
            for query, file in _files():
                yield _multipart(f"{prefix}/{extra.name}", _shared(extra, file), extra.parts, query)
            continue
        if extra.binary:
            for query, file in _files():
                yield Walked("POST", f"{prefix}/{extra.name}", query, file, _FILE)
            if extra.parts:  # the smallest file beside the parts, each the longest it may be
                path = f"{prefix}/{extra.name}"
                yield _multipart(path, [(extra.name, "", _files()[0][1])], extra.parts)
            continue
        for body in _extra_bodies(extra.body_schema):
            yield Walked("POST", f"{prefix}/{extra.name}", (), orjson.dumps(body), _JSON)


_JSON = (("content-type", "application/json"),)
_FILE = (("content-type", "application/octet-stream"),)
MAX_FILE_BYTES = 64 * 2**20  # POSENC_MAX_GGUF_BYTES' default


def _shared(extra: Extra, file: bytes) -> list[tuple[str, str, bytes]]:
    """``file`` cut into as many pieces as ``extra`` has parts of bytes, the body's limit
    shared among them (a part that repeats named as a range of a file)."""
    size = min(len(file), (MAX_FILE_BYTES - 2**20) // len(extra.files))
    return [(part.name, "data@0" if part.repeats else "", file[:size]) for part in extra.files]


def _multipart(
    path: str,
    files: list[tuple[str, str, bytes]],
    parts: tuple[str, ...],
    query: tuple[tuple[str, str], ...] = (),
) -> Walked:
    """Parts of bytes (name, filename, content) and JSON parts of a megabyte each (the most a
    part takes): a config whose one key holds a long list, which the reader refuses or
    ignores."""
    boundary = "walk0boundary"
    long = orjson.dumps({"model_type": "llama", "layer_types": ["full_attention"] * 61_000})
    chunks = [
        *((f'name="{name}"' + (f'; filename="{filename}"' if filename else ""), content)
          for name, filename, content in files),
        *((f'name="{part}"', long) for part in parts),
    ]  # fmt: skip
    body = (
        b"".join(
            f"--{boundary}\r\nContent-Disposition: form-data; {head}\r\n\r\n".encode()
            + content
            + b"\r\n"
            for head, content in chunks
        )
        + f"--{boundary}--\r\n".encode()
    )
    headers = (("content-type", f"multipart/form-data; boundary={boundary}"),)
    return Walked("POST", path, query, body, headers)


@cache
def _files() -> tuple[tuple[tuple[tuple[str, str], ...], bytes], ...]:
    """Files an operation that reads a file's prefix takes: a GGUF whose rope has every part
    (factors, the longest context), the longest prefix (a 256k-token vocabulary, then the
    rest of the budget in tensor data), a header claiming 2^60 tokens, one claiming the widest
    rope with a factor tensor of 32768 values, and 64 MiB of the smallest tensor infos."""
    from tests.gguf.files import STRING, gguf, kv, string

    llama = {
        "general.architecture": "llama",
        "llama.context_length": 2**31 - 1,
        "llama.block_count": 512,
        "llama.embedding_length": 4096,
        "llama.attention.head_count": 32,
        "llama.rope.freq_base": 5e5,
    }
    factors = np.linspace(1, 8, 64, dtype=np.float32)
    small = gguf(llama, [("rope_freqs.weight", factors)])
    tokens = [f"token{i:06d}" for i in range(256_000)]
    longest = gguf({**llama, "tokenizer.ggml.tokens": tokens}, [("rope_freqs.weight", factors)])
    longest += bytes(MAX_FILE_BYTES - len(longest))
    claim = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv("general.architecture", STRING, "llama")
    claim += string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, STRING, 2**60)
    wide = {**llama, "llama.attention.key_length": 65536, "llama.rope.dimension_count": 65536}
    widest = gguf(wide, [("rope_freqs.weight", np.ones(32768, np.float32))])
    info = string("t") + struct.pack("<IQIQ", 1, 4, 0, 0)  # the most tensor infos there can be
    infos = (MAX_FILE_BYTES - 100) // len(info)
    tensors = b"GGUF" + struct.pack("<IQQ", 3, infos, 1) + kv("general.architecture", STRING, "x")
    top = (("n_ctx", str(2**31 - 1)),)
    return (
        ((), small),
        (top, small),
        ((), longest),
        ((), claim + bytes(64)),
        (top, widest),
        ((), tensors + info * infos),
    )


def warm_up(schemes: tuple[Scheme, ...] = SCHEMES) -> Iterator[Walked]:
    """Small answers of every operation, format, dtype and component: what a process loads on
    first use (compiled loops from numba's cache, serialisers) is its start-up, not the cost of
    whichever request of the walk happens to come first."""
    for scheme in schemes:
        prefix = f"/v1/{scheme.name}"
        rows = {} if scheme.rows == "grid" else {"seq_len": 3}
        for example, axes in itertools.product(scheme.examples, _axes(scheme, FORMATS)):
            for endpoint in ("table", "similarity", "verify"):
                if endpoint in scheme.endpoints:
                    path = f"{prefix}/{endpoint}"
                    yield Walked("GET", path, _query(path, "GET", {**example, **rows, **axes}))


def _similarity(scheme: Scheme, params: Any, axes: dict[str, Any]) -> Iterator[Walked]:
    path = f"/v1/{scheme.name}/similarity"
    for rows, (metric, reference) in itertools.product(
        _rows(scheme), zip(METRICS, (None, MAX_POSITION, 0), strict=True)
    ):
        values = {**params(), **rows, **axes, "metric": metric, "reference": reference}
        yield Walked("GET", path, _query(path, "GET", values))


def _encode_body(scheme: Scheme, params: dict[str, Any], axes: dict[str, Any]) -> Walked:
    """The longest positions list a body may hold, every position near the top."""
    top = np.arange(MAX_POSITION, MAX_POSITION - BODY_POSITIONS, -1).tolist()
    given = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    taken = {k: v for k, v in axes.items() if v is not None and k != "format"}
    body = orjson.dumps({**given, **taken, "positions": top})
    path = f"/v1/{scheme.name}/encode"
    return Walked("POST", path, (("format", "npy"),), body, _JSON)


def _conformance(scheme: Scheme, params: dict[str, Any], axes: dict[str, Any]) -> Iterator[Walked]:
    """A client's array of the shape these parameters give, at the far end (a float16 one there
    once conformed though the served values were infinite); a header that announces the largest
    array while the body holds a few bytes; and one whose shape fits nothing."""
    path = f"/v1/{scheme.name}/verify"
    values = {**params, **FARTHEST, **axes}
    query = _query(path, "POST", values)
    dtype = axes["dtype"] or "int32"
    shapes = ["2,2,2", f"{MAX_POSITION + 1},65536"]
    fitting = _served_shape(scheme, params, axes["component"] or "")
    if fitting is not None:
        shapes.append(",".join(map(str, fitting)))
    for shape in shapes:
        size = int(np.prod([int(n) for n in shape.split(",")], dtype=object))
        body = np.zeros(size if size <= 2**20 else 8, dtype=dtype).tobytes()
        headers = (
            ("content-type", "application/octet-stream"),
            ("x-array-shape", shape),
            ("x-array-dtype", dtype),
        )
        yield Walked("POST", path, query, body, headers)


def _served_shape(scheme: Scheme, params: dict[str, Any], component: str) -> tuple[int, ...] | None:
    """The shape of the array for FARTHEST's rows (every cell of a grid), if the parameters
    are valid and it holds at most 2^20 values."""
    try:
        declared = scheme.params(**params)
    except PosencError:
        return None
    count = math.prod(declared.grid) if scheme.rows == "grid" else FARTHEST["seq_len"]
    shape = scheme.shape(declared, count, component)
    return shape if math.prod(shape) <= 2**20 else None


def _extra_bodies(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The operation's examples, and each with every bounded numeric property at its maximum."""
    properties = schema.get("properties", {})
    for example in schema.get("examples", []):
        yield example
        widened = dict(example)
        for name, prop in properties.items():
            if "maximum" in prop:
                widened[name] = prop["maximum"]
        yield widened


# What refusing a query may allocate at most (the README's figure): the parse, the problem
# document, the log line.
REFUSAL_BYTES = 8 * 2**20
# The settings of both walks: a budget that admits every answer the limits allow, and a small
# cache, so that what the process holds is what the request at hand holds.
SETTINGS = {"memory_bytes": 2**30, "cache_bytes": 2**20, "log_level": "warning"}


@dataclass(frozen=True)
class Outcome:
    walked: Walked
    status: int
    seconds: float
    peak: int
    reserved: int


def walk_in_process() -> list[Outcome]:
    """Each request of the walk against one app, one after another, its peak traced."""
    compile_kernels()  # loading the compiled loops is start-up, not any request's cost
    probe = PeakOfEachRequest(create_app(Settings(**SETTINGS)))  # type: ignore[arg-type]
    outcomes: list[Outcome] = []

    async def send_all() -> None:
        # A 500 is an answer to count, not an exception to stop the walk at.
        transport = httpx.ASGITransport(app=probe, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for walked in requests():
                _forget_derived_vectors()
                started = time.perf_counter()
                response = await client.request(
                    walked.method,
                    walked.url,
                    content=walked.body,
                    headers=dict(walked.headers),
                    timeout=60,
                )
                seconds = time.perf_counter() - started
                [(peak, reserved)] = probe.measured
                probe.measured.clear()
                outcomes.append(Outcome(walked, response.status_code, seconds, peak, reserved))

    with _address_space_to_spare(6 * 2**30):
        tracemalloc.start()
        try:
            asyncio.run(send_all())
        finally:
            tracemalloc.stop()
    return outcomes


def _forget_derived_vectors() -> None:
    """Each request is measured cold: frequencies, twiddles and slopes are small caches of
    their own (lru_cache), which an earlier request of the walk may have filled."""
    for cached in (
        scaled,
        sinusoidal.frequencies,
        alibi.slopes,
        rotation._conjugate_twiddles,
        kernels._twiddles,
    ):
        cached.cache_clear()


@contextmanager
def _address_space_to_spare(spare: int) -> Iterator[None]:
    """The test process may map at most ``spare`` more bytes meanwhile: an undeclared
    allocation of gigabytes is then a MemoryError (a 500 the walk counts), not a dead runner."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + spare, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
