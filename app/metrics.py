"""Prometheus metrics: requests and latency by route and status, and the cache's figures.

Each app owns its registry, so test apps never share counters.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from posenc.cache import ByteBoundedCache


class _CacheCollector(Collector):
    def __init__(self, cache: ByteBoundedCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._cache.stats()
        yield CounterMetricFamily("posenc_cache_hits", "cache lookups answered", stats.hits)
        yield CounterMetricFamily("posenc_cache_misses", "cache lookups computed", stats.misses)
        yield GaugeMetricFamily("posenc_cache_bytes", "bytes held by the cache", stats.bytes)
        yield GaugeMetricFamily("posenc_cache_entries", "entries in the cache", stats.entries)
        yield GaugeMetricFamily("posenc_cache_capacity_bytes", "the cache's bound", stats.capacity)
        yield GaugeMetricFamily(
            "posenc_spare_bytes", "pages of tables gone, kept for the next", stats.spare_bytes
        )
        yield CounterMetricFamily(
            "posenc_spares_reused", "tables written into a spare's pages", stats.spares_reused
        )


class Metrics:
    def __init__(self, cache: ByteBoundedCache) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "posenc_requests",
            "HTTP requests answered",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "posenc_request_duration_seconds",
            "time to answer",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.registry.register(_CacheCollector(cache))


class MetricsMiddleware:
    """Counts every request under its route template, so the label set stays bounded."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            labels = (scope["method"], _route(scope), str(status))
            self.metrics.requests.labels(*labels).inc()
            self.metrics.latency.labels(*labels).observe(time.perf_counter() - start)


def _route(scope: Scope) -> str:
    # The router leaves the matched route in the scope; its path is the template, not the URL.
    # A replayed answer (app/replay.py) names its route itself.
    return str(getattr(scope.get("route"), "path", scope.get("posenc.route", "unmatched")))
