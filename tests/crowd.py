"""An adversarial crowd: a bounded, loopback-only load that tries every way to exhaust a replica.

Several threads take turns through a fixed plan for a fixed time: the largest request the limits
allow for every operation, scheme and format (derived from ``/v1/schemes``, the shapes the
service reports for tiny requests, and the configured limits); queries far over every limit;
bodies over the byte limit (announced, endless chunked, huge ``Content-Length``) and bombs
(a gzip bomb the service must not inflate, a deeply nested JSON); slow readers that take a large
answer a few bytes at a time; clients that hang up in the middle of an answer. Meanwhile one
more process asks ``/healthz`` every 50 ms and records how long it took.

Every request is bounded: by count (``max_requests``), by time (``seconds``, and a socket timeout
on each read and write), and by destination (loopback only). ``run`` returns a :class:`Tally`:
statuses by kind of attack, transport outcomes, and the ``/healthz`` latencies.

    tally = crowd.run("http://127.0.0.1:8000", crowd.Limits.from_settings(Settings()))
    assert not tally.wrong_answers()
"""

from __future__ import annotations

import functools
import io
import ipaddress
import itertools
import json
import math
import multiprocessing
import random
import socket
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import numpy as np

from app.settings import Settings

# What a replica may answer to anything at all; everything else is a wrong answer. 415: a body
# in a content coding (the gzip bombs) is refused before a byte of it is read.
ANSWERS = frozenset({200, 304, 413, 415, 422, 429, 503})
# Kinds where the service may close the connection on a request it refuses before the client
# has finished sending it (a 413 for a body that is still coming): a reset then is no failure,
# as long as the kind also saw its 413 at least once.
MAY_CLOSE_EARLY = frozenset({"body-announced-over", "body-huge-length", "body-chunked-endless"})
FORMATS = ("json", "npy", "bin", "csv", "plotly", "png")
TEXT_FORMATS = frozenset({"json", "csv", "plotly"})
WIDE = 1536  # d_model of the crowd's tables: divisible by 4 and 6, as the grid schemes ask
GET_ENCODE_POSITIONS = 1500  # as many as a URL comfortably carries (about 10 KB)
FAR = 2_000_000_000
READ_TIMEOUT = 30.0  # seconds any one read or write of the crowd may wait


@dataclass(frozen=True)
class Limits:
    """The service's size limits, in the units of its settings."""

    max_elements: int
    max_text_elements: int
    max_positions: int
    max_body_bytes: int

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        return cls(
            settings.max_elements,
            settings.max_text_elements,
            settings.max_positions,
            settings.max_body_bytes,
        )

    @classmethod
    def defaults(cls) -> Limits:
        """A replica's limits when nothing is configured: app/settings.py's defaults."""
        fields = Settings.model_fields
        names = ("max_elements", "max_text_elements", "max_positions", "max_body_bytes")
        return cls(*(int(fields[name].get_default(call_default_factory=True)) for name in names))


@dataclass
class Tally:
    """What the crowd saw. ``statuses[kind][status]`` counts answers; a status is an int, or a
    string for an outcome without one (``reset``, ``timeout``, ``refused``)."""

    statuses: dict[str, Counter[int | str]] = field(default_factory=dict)
    healthz: list[float] = field(default_factory=list)
    healthz_failures: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, kind: str, status: int | str) -> None:
        with self.lock:
            self.statuses.setdefault(kind, Counter())[status] += 1

    @property
    def requests(self) -> int:
        return sum(sum(c.values()) for c in self.statuses.values())

    def totals(self) -> Counter[int | str]:
        total: Counter[int | str] = Counter()
        for counts in self.statuses.values():
            total.update(counts)
        return total

    def wrong_answers(self) -> dict[str, Counter[int | str]]:
        """Per kind, every outcome that is not an allowed answer (see ``MAY_CLOSE_EARLY``)."""
        wrong: dict[str, Counter[int | str]] = {}
        for kind, counts in self.statuses.items():
            allowed = ANSWERS | ({"reset"} if kind in MAY_CLOSE_EARLY else set())
            bad = Counter({s: n for s, n in counts.items() if s not in allowed})
            if kind in MAY_CLOSE_EARLY and counts and not counts[413]:
                bad["no 413 at all"] += 1
            if bad:
                wrong[kind] = bad
        return wrong

    def healthz_p99(self) -> float:
        if not self.healthz:
            return math.inf
        return float(np.percentile(self.healthz, 99))

    def summary(self) -> str:
        lines = [
            f"{self.requests} requests in {self.seconds:.1f} s; answers {dict(self.totals())}",
            f"/healthz: {len(self.healthz)} probes, {self.healthz_failures} failed, "
            f"p50 {1000 * float(np.median(self.healthz or [math.inf])):.1f} ms, "
            f"p99 {1000 * self.healthz_p99():.1f} ms, max {1000 * max(self.healthz or [0]):.1f} ms",
        ]
        lines += [f"  {kind}: {dict(counts)}" for kind, counts in sorted(self.statuses.items())]
        return "\n".join(lines)


@dataclass(frozen=True)
class Attack:
    kind: str
    run: Callable[[str, Tally], None]


def run(
    url: str,
    limits: Limits,
    *,
    seconds: float = 30.0,
    threads: int = 6,
    max_requests: int = 5000,
    seed: int = 0,
) -> Tally:
    """Send the crowd at ``url`` (loopback only) for ``seconds``; return what it saw.

    Each thread takes turns through one category of the plan: half the threads the largest
    requests, the others far queries, bodies and readers, so every category is exercised
    however slowly the largest requests are served."""
    _require_loopback(url)
    categories = plan(url, limits)
    shuffler = random.Random(seed)
    for attacks in categories.values():
        shuffler.shuffle(attacks)
    categories["largest"] = _round_robin_by_kind(categories["largest"])
    turns = {name: itertools.cycle(attacks) for name, attacks in categories.items()}
    others = [name for name in categories if name != "largest"]
    roles = [others[k % len(others)] if k % 2 else "largest" for k in range(max(threads, 6))]
    tally = Tally()
    lock = threading.Lock()
    budget = itertools.count()
    start = time.monotonic()
    deadline = start + seconds

    def worker(category: str) -> None:
        while time.monotonic() < deadline and next(budget) < max_requests:
            with lock:
                attack = next(turns[category])
            try:
                attack.run(url, tally)
            except (httpx.TimeoutException, TimeoutError):
                tally.record(attack.kind, "timeout")
            except (httpx.ConnectError, ConnectionRefusedError):
                tally.record(attack.kind, "refused")
                time.sleep(0.2)  # nobody listens (a dead replica): do not spin
            except (httpx.TransportError, OSError):
                tally.record(attack.kind, "reset")

    # The probe runs in a process of its own: in this one it would wait for the GIL behind the
    # crowd's threads, and measure the client's contention rather than the service's latency.
    context = multiprocessing.get_context("spawn")
    stop_probing = context.Event()
    results, sender = context.Pipe(duplex=False)
    prober = context.Process(
        target=_probe, args=(url, stop_probing, sender), name="crowd-healthz", daemon=True
    )
    prober.start()
    sender.close()  # the probe's end only: a probe that dies is an EOF here, not a wait
    if not results.poll(30):  # its first word: it has started
        prober.terminate()
        raise RuntimeError("the /healthz probe process did not start within 30 s")
    results.recv()
    workers = [
        threading.Thread(target=worker, args=(role,), name=f"crowd-{k}-{role}")
        for k, role in enumerate(roles)
    ]
    for thread in workers:
        thread.start()
    for thread in workers:
        # Every read and write has its own timeout, so a worker overruns by at most one request.
        thread.join(timeout=seconds + 2 * READ_TIMEOUT)
    stop_probing.set()
    try:
        latencies = results.recv() if results.poll(15) else []
    except EOFError:  # the probe died: no latencies, so the p99 is infinite and says so
        latencies = []
    prober.join(timeout=10)
    if prober.is_alive():
        prober.terminate()
    with tally.lock:
        for elapsed in latencies:
            tally.healthz.append(elapsed)
            tally.healthz_failures += math.isinf(elapsed)
    tally.seconds = time.monotonic() - start
    return tally


def _probe(url: str, stop: Any, results: Any) -> None:
    """``/healthz`` every 50 ms until ``stop``; sends ``ready`` once, then every latency."""
    latencies: list[float] = []
    with httpx.Client(base_url=url, timeout=5) as client:
        results.send("ready")
        while not stop.is_set():
            begun = time.perf_counter()
            try:
                ok = client.get("/healthz").status_code == 200
            except httpx.TransportError:
                ok = False
            # A failed probe is an answer that never came: it counts as infinitely slow.
            latencies.append(time.perf_counter() - begun if ok else math.inf)
            stop.wait(0.05)
    results.send(latencies)


def _round_robin_by_kind(attacks: list[Attack]) -> list[Attack]:
    """One of each kind (operation and format) before the second of any."""
    by_kind: dict[str, list[Attack]] = {}
    for attack in attacks:
        by_kind.setdefault(attack.kind, []).append(attack)
    rounds = itertools.zip_longest(*by_kind.values())
    return [attack for round_ in rounds for attack in round_ if attack is not None]


def _require_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the crowd only runs against loopback, not {host!r}")


# ---- the plan --------------------------------------------------------------------------------


def plan(url: str, limits: Limits) -> dict[str, list[Attack]]:
    """Every attack once, by category: the largest allowed requests, far-over-limit queries,
    bodies, and abusive readers. Sizes come from the service: ``/v1/schemes`` names the schemes,
    their dtypes and parameters; a tiny table of each tells how its size grows with ``seq_len``."""
    with httpx.Client(base_url=url, timeout=30) as client:
        schemes = client.get("/v1/schemes").json()["schemes"]
        growth = {s["name"]: _growth(client, s) for s in schemes}
    largest: list[Attack] = []
    far: list[Attack] = []
    for scheme in schemes:
        largest += _largest(scheme, growth[scheme["name"]], limits)
        far += _far_over(scheme)
    big = _largest_binary_table(schemes, growth, limits)
    readers = [
        Attack("slow-reader", lambda u, t: _slow_reader(u, big, t)),
        Attack("disconnect-mid-response", lambda u, t: _disconnect(u, big, t)),
    ]
    return {"largest": largest, "far": far, "bodies": _bodies(limits), "readers": readers}


@dataclass(frozen=True)
class Growth:
    """Values in a table of the scheme: ``per * seq_len**power`` (or ``per * cells``)."""

    per: int
    power: int
    grid_sides: int  # 0 for position schemes


def _base_query(scheme: dict[str, Any]) -> dict[str, Any]:
    names = {p["name"] for p in scheme["parameters"]}
    query: dict[str, Any] = {"scheme": scheme["name"]}
    if "d_model" in names:
        query["d_model"] = WIDE
    return query


def _largest_dtype(scheme: dict[str, Any]) -> str:
    return str(max(scheme["dtypes"], key=lambda name: np.dtype(name).itemsize))


def _growth(client: httpx.Client, scheme: dict[str, Any]) -> Growth:
    query = _base_query(scheme)

    def values(**rows: Any) -> int:
        response = client.get("/v1/table", params={**query, **rows, "format": "bin"})
        response.raise_for_status()
        return math.prod(int(n) for n in response.headers["x-array-shape"].split(","))

    if "grid" in {p["name"] for p in scheme["parameters"]}:
        count = _grid_sides(scheme)
        return Growth(values(grid=",".join(["1"] * count)), 1, count)
    two, three = values(seq_len=2), values(seq_len=3)
    power = 1 if two * 3 == three * 2 else 2
    return Growth(two // 2**power, power, 0)


def _grid_sides(scheme: dict[str, Any]) -> int:
    # The grid parameter lists exactly as many sides as the scheme has axes.
    grid = next(p for p in scheme["parameters"] if p["name"] == "grid")
    return int(grid["min_items"])


def _rows_within(growth: Growth, limit: int) -> int:
    """The largest seq_len (or cell count) whose table holds at most ``limit`` values."""
    return math.isqrt(limit // growth.per) if growth.power == 2 else limit // growth.per


def _rows_query(growth: Growth, rows: int) -> dict[str, Any]:
    if not growth.grid_sides:
        return {"seq_len": rows}
    side = max(1, int(rows ** (1 / growth.grid_sides)))
    sides = [side] * (growth.grid_sides - 1)
    sides.append(max(1, rows // side ** (growth.grid_sides - 1)))
    return {"grid": ",".join(map(str, sides))}


def _get(kind: str, path: str, query: dict[str, Any]) -> Attack:
    target = f"{path}?{urlencode(query)}"

    def attack(url: str, tally: Tally) -> None:
        tally.record(kind, _fetch(url, "GET", target))

    return Attack(kind, attack)


def _post(
    kind: str, path: str, query: dict[str, Any], body: bytes, headers: dict[str, str]
) -> Attack:
    target = f"{path}?{urlencode(query)}" if query else path

    def attack(url: str, tally: Tally) -> None:
        tally.record(kind, _fetch(url, "POST", target, body, headers))

    return Attack(kind, attack)


def _fetch(
    url: str, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> int:
    """One request on a fresh connection; the answer is read in full and dropped, so the crowd
    holds none of it."""
    with (
        httpx.Client(base_url=url, timeout=httpx.Timeout(READ_TIMEOUT, connect=5)) as client,
        client.stream(method, target, content=body or None, headers=headers) as response,
    ):
        for _ in response.iter_raw(2**20):
            pass
        return response.status_code


def _largest(scheme: dict[str, Any], growth: Growth, limits: Limits) -> list[Attack]:
    query = _base_query(scheme)
    dtype = _largest_dtype(scheme)
    attacks = []
    for fmt in FORMATS:
        limit = limits.max_text_elements if fmt in TEXT_FORMATS else limits.max_elements
        rows = _rows_query(growth, _rows_within(growth, limit))
        q = {**query, **rows, "dtype": dtype, "format": fmt}
        attacks.append(_get(f"largest-table-{fmt}", "/v1/table", q))
        if scheme["similarity"] and not growth.grid_sides:
            n = min(math.isqrt(limit), limits.max_elements // growth.per)
            q = {**query, "seq_len": n, "dtype": dtype, "format": fmt}
            attacks.append(_get(f"largest-similarity-{fmt}", "/v1/similarity", q))
        if growth.power == 1 and not growth.grid_sides:
            count = min(GET_ENCODE_POSITIONS, limits.max_positions)
            positions = ",".join(str(k * 7919 % 2**31) for k in range(count))
            per_column = max(1, growth.per // WIDE)  # rope's cos_sin: two values per column
            d_model = min(65536, limit // (count * per_column)) // 2 * 2
            width = {"d_model": d_model} if "d_model" in query else {}
            q = {**query, **width, "positions": positions, "dtype": dtype, "format": fmt}
            attacks.append(_get(f"largest-encode-get-{fmt}", "/v1/encode", q))
    # /v1/verify: the array and seq_len² (its documented work); json only.
    if not growth.grid_sides:
        n = _verify_rows(growth, limits.max_elements)
        attacks.append(_get("largest-verify-get", "/v1/verify", {**query, "seq_len": n}))
    if growth.power == 1 and not growth.grid_sides:
        attacks += _largest_encode_posts(scheme, growth, limits, dtype)
    if scheme["conformance"]:
        attacks += _largest_verify_posts(limits)
    return attacks


def _verify_rows(growth: Growth, limit: int) -> int:
    n = 1
    while growth.per * (2 * n) ** growth.power + (2 * n) ** 2 <= limit:
        n *= 2
    step = n
    while step > 1:
        step //= 2
        if growth.per * (n + step) ** growth.power + (n + step) ** 2 <= limit:
            n += step
    return n


def _largest_encode_posts(
    scheme: dict[str, Any], growth: Growth, limits: Limits, dtype: str
) -> list[Attack]:
    count = limits.max_positions
    d_model = max(1, min(65536, limits.max_elements // (count * max(1, growth.per // WIDE))))
    base = {"scheme": scheme["name"], "positions": list(range(count)), "dtype": dtype}
    if "d_model" in {p["name"] for p in scheme["parameters"]}:
        base["d_model"] = d_model
    attacks = [
        _post(
            "largest-encode-post",
            "/v1/encode",
            {"format": "bin"},
            json.dumps(base).encode(),
            {"Content-Type": "application/json"},
        )
    ]
    if scheme["name"] == "sinusoidal":
        # Embeddings as long as the body limit allows: each value written "0.5," (4 bytes).
        width = 8
        rows = min(count, (limits.max_body_bytes - 2**20) // (4 * width))
        while rows * width * 2 * 4 <= limits.max_body_bytes - 2**20 and width * 2 <= 65536:
            width *= 2
            rows = min(count, (limits.max_body_bytes - 2**20) // (4 * width))
        row = "[" + ",".join(["0.5"] * width) + "]"
        head = f'{{"scheme":"sinusoidal","d_model":{width},"positions":{list(range(rows))},'
        body = (head + '"embeddings":[' + ",".join([row] * rows) + "]}").encode()
        attacks.append(
            _post(
                "largest-encode-embeddings",
                "/v1/encode",
                {"format": "bin"},
                body,
                {"Content-Type": "application/json"},
            )
        )
    return attacks


def _largest_verify_posts(limits: Limits) -> list[Attack]:
    """The biggest table a client may send for checking: .npy, raw and JSON."""
    d_model = 512
    header = 128
    rows = min(limits.max_elements, (limits.max_body_bytes - header) // 8) // d_model
    table = np.zeros((rows, d_model))  # a zero table: wrong, so every check has work to do
    npy = _npy_bytes(table)
    json_rows = min(rows, (limits.max_body_bytes - 2**20) // (2 * d_model))
    text = '{"data":[' + ",".join(["[" + ",".join(["0"] * d_model) + "]"] * json_rows) + "]}"
    query = {"d_model": d_model, "dtype": "float64"}
    return [
        _post(
            "largest-verify-npy", "/v1/verify", query, npy, {"Content-Type": "application/x-npy"}
        ),
        _post(
            "largest-verify-raw",
            "/v1/verify",
            query,
            table.tobytes(),
            {
                "Content-Type": "application/octet-stream",
                "X-Array-Shape": f"{rows},{d_model}",
                "X-Array-Dtype": "float64",
            },
        ),
        _post(
            "largest-verify-json",
            "/v1/verify",
            query,
            text.encode(),
            {"Content-Type": "application/json"},
        ),
    ]


def _npy_bytes(array: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _far_over(scheme: dict[str, Any]) -> list[Attack]:
    """Queries whose answers could never be served: refused from their parameters alone."""
    name, query = scheme["name"], _base_query(scheme)
    if "d_model" in query:
        query["d_model"] = 65532  # the widest a grid scheme accepts (divisible by 4 and 6)
    names = {p["name"] for p in scheme["parameters"]}
    if "grid" in names:
        sides = _grid_sides(scheme)
        rows: dict[str, Any] = {"grid": ",".join(["16777216"] * sides)}
    else:
        rows = {"seq_len": FAR, "offset": 2**31 - FAR - 1}
    attacks = [_get("far-table", "/v1/table", {**query, **rows, "format": "bin"})]
    if scheme["similarity"]:
        attacks.append(_get("far-similarity", "/v1/similarity", {**query, **rows}))
    attacks.append(_get("far-verify", "/v1/verify", {**query, **rows}))
    if name == "sinusoidal":
        positions = ",".join(str(FAR + k) for k in range(GET_ENCODE_POSITIONS))
        attacks.append(_get("far-encode", "/v1/encode", {**query, "positions": positions}))
    return attacks


# ---- bodies ----------------------------------------------------------------------------------


def _bodies(limits: Limits) -> list[Attack]:
    over = limits.max_body_bytes + 1
    # 1 GiB of zeros in about a megabyte: a service that inflated it would hold a gigabyte.
    bomb = _gzip_zeros(2**30)
    nested = b'{"data":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return [
        Attack("body-announced-over", lambda u, t: _announce(u, over, t)),
        Attack("body-huge-length", lambda u, t: _announce(u, 10**18, t)),
        Attack("body-chunked-endless", lambda u, t: _chunked_endless(u, limits, t)),
        _post(
            "body-gzip-bomb",
            "/v1/verify",
            {"d_model": 512},
            bomb,
            {"Content-Type": "application/x-npy", "Content-Encoding": "gzip"},
        ),
        _post(
            "body-gzip-bomb-json",
            "/v1/encode",
            {},
            bomb,
            {"Content-Type": "application/json", "Content-Encoding": "gzip"},
        ),
        _post(
            "body-nested-json",
            "/v1/verify",
            {"d_model": 512},
            nested,
            {"Content-Type": "application/json"},
        ),
    ]


@functools.cache
def _gzip_zeros(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip member
    chunk = bytes(2**20)
    parts = [compressor.compress(chunk) for _ in range(size // len(chunk))]
    parts.append(compressor.flush())
    return b"".join(parts)


def _connect(url: str, timeout: float = 10) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "", parts.port or 80), timeout=timeout)


def _status(sock: socket.socket, wait: float) -> int | str:
    """The status of the answer on ``sock``, read within ``wait`` seconds."""
    sock.settimeout(wait)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return "reset" if not data else "garbled"
            data += chunk
    except TimeoutError:
        return "timeout"
    except OSError:
        return "reset"
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return "garbled"


def _announce(url: str, length: int, tally: Tally) -> None:
    """Headers that announce a body over the limit, and no body: the verdict must come without
    it (a client that waits for it before sending would otherwise hang)."""
    kind = "body-announced-over" if length < 10**18 else "body-huge-length"
    with _connect(url) as sock:
        sock.sendall(
            b"POST /v1/verify?d_model=512 HTTP/1.1\r\nHost: crowd\r\n"
            b"Content-Type: application/x-npy\r\n"
            b"Content-Length: %d\r\n\r\n" % length
        )
        tally.record(kind, _status(sock, 5))


def _chunked_endless(url: str, limits: Limits, tally: Tally) -> None:
    """A chunked body that never ends, sent until the service answers (which it must do once
    the body passes the limit) or well past the limit."""
    chunk = b"%x\r\n%s\r\n" % (2**20, bytes(2**20))
    with _connect(url) as sock:
        sock.sendall(
            b"POST /v1/verify?d_model=512 HTTP/1.1\r\nHost: crowd\r\n"
            b"Content-Type: application/x-npy\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sent = 0
        try:
            while sent < 2 * limits.max_body_bytes + 2**24:
                sock.settimeout(0)
                try:
                    if sock.recv(1, socket.MSG_PEEK):
                        break  # an answer is waiting
                except BlockingIOError:
                    pass
                sock.settimeout(10)
                sock.sendall(chunk)
                sent += 2**20
        except OSError:
            pass  # closed while we sent: the answer, if any, is still readable
        tally.record("body-chunked-endless", _status(sock, 5))


# ---- abusive readers --------------------------------------------------------------------------


def _largest_binary_table(
    schemes: list[dict[str, Any]], growth: dict[str, Growth], limits: Limits
) -> str:
    scheme = next(s for s in schemes if s["name"] == "sinusoidal")
    rows = _rows_within(growth["sinusoidal"], limits.max_elements)
    query = {**_base_query(scheme), "seq_len": rows, "dtype": "float64", "format": "bin"}
    return f"/v1/table?{urlencode(query)}"


_offsets = itertools.count(1)


def _fresh(target: str) -> str:
    # A new offset each time: the answer cannot come from a cache, so it is computed and held.
    return f"{target}&offset={next(_offsets) * 100_000}"


def _slow_reader(url: str, target: str, tally: Tally) -> None:
    """Reads the largest table 64 bytes every 20 ms for 3 s, then goes away."""
    with _connect(url, timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: crowd\r\n\r\n" % _fresh(target).encode())
        status = _status(sock, 30)
        tally.record("slow-reader", status)
        end = time.monotonic() + 3
        while time.monotonic() < end and sock.recv(64):
            time.sleep(0.02)


def _disconnect(url: str, target: str, tally: Tally) -> None:
    """Asks for the largest table, reads its first bytes, and hangs up."""
    with _connect(url, timeout=30) as sock:
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: crowd\r\n\r\n" % _fresh(target).encode())
        tally.record("disconnect-mid-response", _status(sock, 30))
