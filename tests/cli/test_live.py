"""`--url`: every subcommand asked of a real uvicorn says what it says in process — the same
exit code, the same text, the same JSON, the same bytes — and a refusal is exit 2 in the
service's own words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import FAULTS, check_args, posenc
from tests.live.conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    live = start_server({"POSENC_CACHE_BYTES": str(8 * 2**20)})
    yield live
    stop_server(live)


@pytest.mark.parametrize("name", list(FAULTS))
def test_check_says_the_same_through_the_service(
    server: LiveServer, caches: Path, name: str
) -> None:
    here, there = (
        posenc(*check_args(caches, name)),
        posenc(*check_args(caches, name), "--url", server.url),
    )
    assert there.code == here.code == (0 if FAULTS[name].conforms else 1), there.stderr
    assert there.stdout == here.stdout, here.stderr


def test_json_is_the_same_document_through_the_service(server: LiveServer, caches: Path) -> None:
    args = [*check_args(caches, "float32-angles"), "--json"]
    assert posenc(*args, "--url", server.url).stdout == posenc(*args).stdout


def test_a_models_config_reads_the_same_through_the_service(
    server: LiveServer, llama3: Path, tmp_path: Path
) -> None:
    for extra in ([], ["--json"]):
        there = posenc("model", llama3, *extra, "--url", server.url)
        assert there.code == 0, there.stderr
        assert there.stdout == posenc("model", llama3, *extra).stdout
    built = posenc("table", "--config", llama3, "--seq-len", "512", "-o", "c.npy", cwd=tmp_path)
    assert built.code == 0, built.stderr
    ran = posenc("check", "c.npy", "--config", llama3, "--url", server.url, cwd=tmp_path)
    assert ran.code == 0 and "value_rounding" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["sinusoidal", "--d-model", "63", "--seq-len", "9", "--offset", "1000"],
        ["rope", "--d-model", "8", "--scaling", "yarn", "--factor", "4",
         "--original-max-position-embeddings", "16", "--seq-len", "40", "--component", "cos"],
        ["rope", "--d-model", "8", "--seq-len", "5", "--dtype", "float16"],
        ["t5", "--num-buckets", "8", "--bidirectional", "false", "--seq-len", "12"],
        ["sinusoidal2d", "--d-model", "8", "--grid", "3,2"],
    ],
)  # fmt: skip
@pytest.mark.parametrize("suffix", ["npy", "bin", "csv"])
def test_a_table_is_the_same_bytes_through_the_service(
    server: LiveServer, tmp_path: Path, args: list[str], suffix: str
) -> None:
    here, there = tmp_path / f"here.{suffix}", tmp_path / f"there.{suffix}"
    assert posenc("table", *args, "-o", here).code == 0
    ran = posenc("table", *args, "-o", there, "--url", server.url)
    assert ran.code == 0, ran.stderr
    assert there.read_bytes() == here.read_bytes()


def test_the_services_refusals_are_exit_2_in_its_own_words(
    server: LiveServer, caches: Path, tmp_path: Path
) -> None:
    # 2^25 values: computed here, but over the limit of one answer of a default service.
    out = tmp_path / "big.npy"
    big: list[str | Path] = ["table", "rope", "--d-model", "128", "--seq-len", "131072", "-o", out]
    ran = posenc(*big, "--url", server.url)
    assert ran.code == 2 and "POSENC_MAX_ELEMENTS" in ran.stderr, ran.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
    bad = posenc("check", "sinusoidal", caches / "correct-float32.npy", "--d-model", "63",
                 "--url", server.url)  # fmt: skip
    assert bad.code == 2 and "expected shape [128, 63]" in bad.stderr
    missing = posenc("check", "sinusoidal", caches / "correct-float32.npy", "--url", server.url)
    assert missing.code == 2 and "d_model" in missing.stderr
