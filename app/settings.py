"""Configuration from ``POSENC_*`` environment variables, read once when the app is created."""

from __future__ import annotations

import os

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="POSENC_", frozen=True, extra="ignore")

    max_elements: int = Field(2**24, ge=1, description="values in one response")
    max_text_elements: int = Field(2**21, ge=1, description="values in one JSON or CSV response")
    max_positions: int = Field(65536, ge=1, description="items in one positions list")
    max_body_bytes: int = Field(64 * 2**20, ge=1, description="bytes in one request body")
    cache_bytes: int = Field(256 * 2**20, ge=0, description="bytes of computed arrays and bodies")
    cors_origins: str = Field("*", description="comma-separated origins allowed by CORS")
    log_level: str = "info"
    request_timeout_s: float = Field(10.0, gt=0, description="longest a request may compute")
    # One core is left to the event loop, so /healthz and cache hits never queue behind NumPy.
    threads: int = Field(
        default_factory=lambda: max(1, (os.cpu_count() or 2) - 1),
        ge=1,
        le=256,
        description="threads for the heavy part of requests",
    )

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]
