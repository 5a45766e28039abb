"""The application factory: ``uvicorn --factory app.main:create_app``."""

from __future__ import annotations

import faulthandler
import gc
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

import posenc
from app import documents, operations, problems, provenance
from app.admission import AdmissionMiddleware, Budget
from app.metrics import Metrics, MetricsMiddleware
from app.middleware import (
    BodyLimitMiddleware,
    ContentCodingMiddleware,
    FlowControlMiddleware,
    SecurityHeadersMiddleware,
)
from app.observability import AccessLogMiddleware, configure_logging, log_warnings_as_json
from app.replay import ReplayMiddleware
from app.resources import confine_to_quota
from app.responses import VERSION
from app.settings import Settings
from posenc.declare import Scheme
from posenc.registry import SCHEMES

DESCRIPTION = """Transformer positional encodings, correctly rounded: every value is computed in
float64 with an exact angle reduction and rounded once to the served dtype, so a float32 table is
within 1 ulp of the exact value at every position below 2^31. Errors are
`application/problem+json`; computational GETs carry strong ETags and may be cached forever."""


STATIC = Path(__file__).parent / "static"


@asynccontextmanager
async def _serving_process(app: FastAPI) -> AsyncIterator[None]:
    """What a serving process sets for itself, once, as the server starts (not when an app is
    merely built, as tests do by the hundred)."""
    # A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL) in any thread — a compiled loop,
    # BLAS, a C extension — then leaves the Python stack of every thread on stderr, the log,
    # before the process dies: without it a crash says only "Segmentation fault", or nothing.
    # Here, not in a Makefile or an image, so every way of serving has it; not when Python
    # already has it (PYTHONFAULTHANDLER, or pytest's own, which owns its stderr).
    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr, all_threads=True)
    # A worker thread running Python hands the GIL to the event loop after this long (5 ms by
    # default): /healthz waits at most one interval behind a computation, not five.
    sys.setswitchinterval(0.001)
    confine_to_quota()
    log_warnings_as_json()
    provenance.digest()  # every ETag's: read the code once, before the first request waits
    # What exists now (the imports, the app, its routes and models: ~167k objects) lives as
    # long as the process: out of the collector's sight, a full collection no longer walks it
    # (one took 90–116 ms, about once per 100 cold requests, inside whichever one it hit).
    gc.collect()
    gc.freeze()
    yield


def create_app(settings: Settings | None = None, schemes: tuple[Scheme, ...] = SCHEMES) -> FastAPI:
    """The service for ``schemes`` (the registry's unless a test brings its own)."""
    settings = settings or Settings()
    configure_logging(settings.log_level)
    app = FastAPI(
        title="posenc", version=VERSION, description=DESCRIPTION, lifespan=_serving_process
    )
    app.state.settings = settings
    app.state.cache = posenc.ByteBoundedCache(settings.cache_bytes)
    app.state.metrics = Metrics(app.state.cache)
    app.state.limiter = None  # made on first use, inside the event loop (app/admission.py)
    app.state.budget = Budget(
        settings.memory_bytes, settings.admission_queue, settings.admission_wait_s
    )
    app.state.schemes = schemes
    app.include_router(operations.router(schemes))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        """The visualisation page: every view fetched from the public API."""
        return FileResponse(STATIC / "index.html")

    _add_operations(app)
    problems.register(app)
    # Added last runs first: metrics see every answer, including 413s and CORS preflights.
    app.add_middleware(AdmissionMiddleware, budget=app.state.budget)
    app.add_middleware(ReplayMiddleware, cache=app.state.cache)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(ContentCodingMiddleware)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.cors_origin_list,
        allow_credentials=False,
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["*"],
        expose_headers=["X-Array-Shape", "X-Array-Dtype", "ETag", "X-Next-Position-Delta"],
    )
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(AccessLogMiddleware)
    app.add_middleware(FlowControlMiddleware)
    return app


def _add_operations(app: FastAPI) -> None:
    health: dict[int | str, dict[str, Any]] = {
        200: {"content": {"application/json": {"schema": documents.HEALTH}}}
    }

    # The three probes are coroutines, answered on the event loop: never queued behind a
    # computation for a worker thread (which also runs at a lower priority).
    @app.get("/healthz", tags=["operations"], responses=health)
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], responses=health)
    async def readyz(request: Request) -> dict[str, str]:
        """Readiness: the core computes (the first scheme's first example) and the cache
        stores."""
        cache: posenc.ByteBoundedCache = request.app.state.cache
        scheme: Scheme = request.app.state.schemes[0]
        params = scheme.params(**scheme.examples[0])
        component = scheme.components[0] if scheme.components else ""
        dtype = scheme.dtypes[0] if scheme.dtypes else "int32"
        probe = cache.get_or_compute(
            ("readyz",),
            lambda: scheme.encode(params, np.arange(2, dtype=np.int64), dtype, component),
        )
        if not np.all(np.isfinite(probe)):
            raise RuntimeError("the core computed a probe array that is not finite")
        return {"status": "ready"}

    text: dict[int | str, dict[str, Any]] = {
        200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}
    }

    @app.get("/metrics", tags=["operations"], response_class=Response, responses=text)
    async def metrics(request: Request) -> Response:
        """Prometheus text format: requests and latency by route and status; cache figures."""
        body = generate_latest(request.app.state.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)
