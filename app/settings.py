"""Configuration from ``POSENC_*`` environment variables, read once when the app is created."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.resources import memory_limit, usable_cpus

_MiB = 2**20


def _memory_bytes() -> int:
    """Half the container's memory limit; 1 GiB where there is none.

    The other half is for what no request's cost counts: the idle process (~130 MiB of Python,
    NumPy and the web stack), the cache (an eighth), and the allocator's slack. At 512 MiB that
    leaves 256 + 64 + ~130 MiB, under the limit with room to spare.
    """
    limit = memory_limit()
    return limit // 2 if limit is not None else 1024 * _MiB


def _cache_bytes() -> int:
    limit = memory_limit()
    return min(256 * _MiB, limit // 8) if limit is not None else 256 * _MiB


def _threads() -> int:
    # One core is left to the event loop, so /healthz and cache hits never queue behind NumPy.
    return max(1, usable_cpus() - 1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="POSENC_", frozen=True, extra="ignore")

    max_elements: int = Field(2**24, ge=1, description="values in one response")
    max_text_elements: int = Field(2**21, ge=1, description="values in one JSON or CSV response")
    max_positions: int = Field(
        65536, ge=1, description="items in one positions list, or ids in one position_ids"
    )
    max_body_bytes: int = Field(64 * _MiB, ge=1, description="bytes in one request body")
    max_gguf_bytes: int = Field(
        64 * _MiB,
        ge=1,
        description="bytes of a GGUF file's first part (its header), sent to be read",
    )
    max_work: int = Field(
        2 * 10**9, ge=1, description="work units (≈ ns on one core) one request may cost"
    )
    memory_bytes: int = Field(
        default_factory=_memory_bytes,
        ge=_MiB,
        description="bytes that admitted requests may hold at once",
    )
    cache_bytes: int = Field(
        default_factory=_cache_bytes, ge=0, description="bytes of computed arrays and bodies"
    )
    admission_wait_s: float = Field(
        2.0, ge=0, description="longest a request waits for memory before a 503"
    )
    admission_queue: int = Field(64, ge=0, description="requests that may wait for memory")
    cors_origins: str = Field("*", description="comma-separated origins allowed by CORS")
    log_level: str = "info"
    request_timeout_s: float = Field(10.0, gt=0, description="longest a request may compute")
    threads: int = Field(
        default_factory=_threads, ge=1, le=256, description="threads for the heavy part of requests"
    )

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]
