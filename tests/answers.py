"""The version held to the answers: a broad sample of GET answers, and their digests recorded
for the version that serves them (``tests/answers.json``).

An ETag changes with any change of the code (:mod:`app.provenance`), so no cache keeps a stale
answer; the version is for people: it must say when answers changed, and CHANGELOG.md which.
``tests/test_answer_versions.py`` fails when a sampled answer's bytes differ from those recorded
for ``posenc.__version__``. Then bump the version, say in CHANGELOG.md which answers changed,
and record them::

    python -m tests.answers

which refuses to record other bytes under a version already recorded. The answers are
recorded on one system (machine, C library, zlib: llama.cpp's recipe calls glibc's ``cosf``, a
PNG is zlib's): on another, the test says so and is skipped, as its bytes may rightly differ.

The sample, from the registry (so a new scheme is sampled without an edit here): every scheme's
examples as tables in every component and every format, in every dtype, near 0 and (for rope)
far out, where the recipes part; their encode, similarity and verify; and the GETs that
``POST /v1/rope/config`` links for the configs of tests/hub_configs.py, each cut to a few rows
at the end of the table it names.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

import posenc
from app import provenance
from posenc.registry import SCHEMES
from tests.conftest import Client
from tests.hub_configs import HUB_CONFIGS, llama_31_config, qwen2_vl_config

MANIFEST = Path(__file__).with_name("answers.json")
FORMATS = ("json", "npy", "bin", "csv", "plotly", "png")
DTYPES = ("float32", "float64", "float16")
# Where recipes part from the exact rope by more than a rounding (docs/recipes.md).
FAR_OFFSET = 10**6


def _query(values: dict[str, Any]) -> str:
    def text(value: Any) -> str:
        return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)

    return urlencode({name: text(value) for name, value in values.items()})


def _scheme_urls() -> Iterator[str]:
    for scheme in SCHEMES:
        names = {f.name for f in scheme.fields()}
        for n, example in enumerate(scheme.examples):
            rows = {} if "grid" in example else {"seq_len": 5, "offset": 3}
            base = f"/v1/{scheme.name}"
            for component in scheme.components or (None,):
                chosen = {"component": component} if component else {}
                yield f"{base}/table?{_query({**example, **rows, **chosen})}"
            formats = FORMATS if n == 0 else ("npy",)
            yield from (f"{base}/table?{_query({**example, **rows, 'format': f})}" for f in formats)
            if "dtype" in names:
                for dtype in DTYPES:
                    yield f"{base}/table?{_query({**example, **rows, 'dtype': dtype})}&format=npy"
            if scheme.rotates and "grid" not in example:
                far = {"seq_len": 3, "offset": FAR_OFFSET}
                yield f"{base}/table?{_query({**example, **far})}&format=npy"
            positions = "0,5,17" if "grid" not in example else "0,1,4"
            yield f"{base}/encode?{_query(example)}&positions={positions}"
            if "similarity" in scheme.endpoints:
                yield f"{base}/similarity?{_query({**example, **rows})}"
            verify_rows = {} if "grid" in example else {"seq_len": 16}
            yield f"{base}/verify?{_query({**example, **verify_rows})}"


def _shortened(url: str, rows: int) -> str:
    """``url`` cut to its last ``rows`` rows (a config's table is the model's whole context)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    end = int(query.get("offset", 0)) + int(query.get("seq_len", rows))
    query.update(seq_len=str(rows), offset=str(max(0, end - rows)))
    return f"{parts.path}?{urlencode(query)}"


def _config_urls(client: Client) -> Iterator[str]:
    configs = [llama_31_config(), qwen2_vl_config(), *HUB_CONFIGS.values()]
    for config in configs:
        answer = client.post("/v1/rope/config", json=config).json()
        for rope in answer["ropes"]:
            for name, url in sorted(rope["urls"].items()):
                if not name.startswith("alias_"):
                    yield _shortened(url, 64 if name == "verify" else 4)


def sample(client: Client) -> list[str]:
    return sorted({*_scheme_urls(), *_config_urls(client)})


def digests(client: Client) -> dict[str, str]:
    """Each sampled URL's body, hashed (uncompressed: the bytes a client decodes)."""
    found = {}
    for url in sample(client):
        answer = client.get(url, headers={"Accept-Encoding": "identity"})
        if answer.status_code != 200:
            raise AssertionError(f"the sample asks what is not served: {url} {answer.text}")
        found[url] = hashlib.sha256(answer.content).hexdigest()
    return found


def recorded() -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads(MANIFEST.read_bytes())
    return loaded


def changed(now: dict[str, str], then: dict[str, str]) -> list[str]:
    return sorted(url for url in now.keys() | then.keys() if now.get(url) != then.get(url))


def record() -> None:
    now = digests(Client())
    if MANIFEST.exists():
        then = recorded()
        moved = changed(now, then["answers"])
        if then["version"] == posenc.__version__ and moved:
            sys.exit(
                f"{len(moved)} answers differ from those recorded for {posenc.__version__} "
                f"(first: {moved[0]}): bump posenc.__version__ and say in CHANGELOG.md which "
                "answers changed, then record them"
            )
    manifest = {"version": posenc.__version__, "system": provenance.system(), "answers": now}
    MANIFEST.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    record()
