"""Issue 45's goal: ``POST /v1/rope/config`` costs what reading the config costs. Its answer
for three configs as the Hub publishes them (Llama 3.1 8B, Gemma 3 1B, Qwen2-VL 7B), computed
by the core as the service computes it, best of 200 in this process: the first answer for a
model (its base moved each time, so no rope has been seen) and a model asked about again."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.settings import Settings
from posenc.declare import Limits
from posenc.registry import get
from tests.hub_configs import HUB_CONFIGS, llama_31_config, qwen2_vl_config

CONFIGS = {
    "Llama 3.1 8B": llama_31_config,
    "Gemma 3 1B": lambda: HUB_CONFIGS["gemma3_text 1B"],
    "Qwen2-VL 7B": qwen2_vl_config,
}


def config_answers(row: Callable[[str, str, str, str], None]) -> None:
    (extra,) = (e for e in get("rope").extras if e.name == "config")
    settings = Settings()  # the defaults a deployment starts from
    limits = Limits(settings.max_elements, settings.max_work, settings.memory_bytes)
    for name, config in CONFIGS.items():
        extra.handle(config(), limits)  # imports and compiled loops, once
        first, again = float("inf"), float("inf")
        for attempt in range(200):
            body = {**config(), "rope_theta": 123456.0 + attempt}
            start = time.perf_counter()
            extra.handle(body, limits)
            middle = time.perf_counter()
            extra.handle(body, limits)
            first = min(first, middle - start)
            again = min(again, time.perf_counter() - middle)
        row(
            f"45. POST /v1/rope/config, {name}",
            f"{first * 1e3:.3f} ms a new model",
            f"{again * 1e3:.3f} ms asked again",
            "measured",
        )


if __name__ == "__main__":
    config_answers(lambda *cells: print("  ".join(cells)))
