"""`posenc applied` as a CI step runs it (the installed script in a subprocess), and
posenc.testing.assert_rope_applied as a port's test suite calls it: exit 0 when the kernel
applied the model's rope, 1 when it did not (the diagnosis printed) or the data cannot tell, 2
on bad input; the assertion's message is the same diagnosis."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posenc.schemes.rope.params import RopeParams
from posenc.testing import assert_rope_applied, rope_applied
from tests.applied.test_core import bfloat16, exact, vectors
from tests.cli.conftest import posenc

POSITIONS = np.arange(5000, 5032)
LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "rope_theta": 500000.0,
}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """q before and after a correct rope (base 500000) and after one of base 10000, the ids,
    the model's config, and the bfloat16 pair as raw files."""
    folder = tmp_path_factory.mktemp("dumps")
    x = vectors(32, 4, 64)
    np.save(folder / "q.npy", x)
    np.save(folder / "q_rope.npy", exact(RopeParams(d_model=64, base=500000.0), x, POSITIONS))
    np.save(folder / "q_base.npy", exact(RopeParams(d_model=64), x, POSITIONS))
    np.save(folder / "ids.npy", POSITIONS)
    (folder / "config.json").write_text(json.dumps(LLAMA))
    words = bfloat16(x.astype(np.float64))
    turned = (words.astype(np.uint32) << 16).view(np.float32)
    (folder / "q.bf16").write_bytes(words.tobytes())
    after = bfloat16(exact(RopeParams(d_model=64, base=500000.0), turned, POSITIONS, "float64"))
    (folder / "q_rope.bf16").write_bytes(after.tobytes())
    return folder


def test_a_kernel_that_applied_the_models_rope_exits_0(dumps: Path) -> None:
    ran = posenc(
        "applied", dumps / "q.npy", dumps / "q_rope.npy", "--positions", dumps / "ids.npy",
        "--config", dumps / "config.json", "--layer", "3",
    )  # fmt: skip
    assert ran.code == 0, ran.stderr
    assert "the kernel applied the model's rope (recipe exact" in ran.stdout


def test_another_base_exits_1_with_its_diagnosis(dumps: Path) -> None:
    ran = posenc(
        "applied", dumps / "q.npy", dumps / "q_base.npy", "--positions", dumps / "ids.npy",
        "--config", dumps / "config.json", "--json",
    )  # fmt: skip
    assert ran.code == 1, ran.stderr
    answer = json.loads(ran.stdout)
    assert [f["name"] for f in answer["diagnosis"]] == ["base_mismatch"]


def test_raw_bfloat16_files_are_read_with_their_shape_and_dtype(dumps: Path) -> None:
    ran = posenc(
        "applied", dumps / "q.bf16", dumps / "q_rope.bf16", "--shape", "32,4,64",
        "--dtype", "bfloat16", "--offset", "5000", "--d-model", "64", "--base", "500000",
    )  # fmt: skip
    assert ran.code == 0, ran.stdout + ran.stderr
    assert ", bfloat16" in ran.stdout.splitlines()[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--d-model", "64", "--layer", "1"], "--layer names a layer of the model"),
        (["--config", "config.json", "--layer", "9"], "layer: the model has 4 layers"),
        (["--d-model", "64", "--positions", "q.npy"], "positions: dtype must be one of int32"),
        (["--d-model", "63"], "d_model: must be even"),
    ],
)
def test_bad_input_exits_2_naming_it(dumps: Path, extra: list[str], message: str) -> None:
    args = [str(dumps / a) if a.endswith((".json", ".npy")) else a for a in extra]
    ran = posenc("applied", dumps / "q.npy", dumps / "q_rope.npy", *args)
    assert ran.code == 2 and message in ran.stderr, ran.stderr


def test_the_assertion_passes_a_faithful_kernel_and_fails_with_the_diagnosis() -> None:
    import torch

    x = vectors(32, 4, 64)
    turned = exact(RopeParams(d_model=64, base=500000.0), x, POSITIONS)
    assert_rope_applied(x, turned, POSITIONS, LLAMA, layer=2)
    as_torch = torch.from_numpy(turned).bfloat16()
    assert rope_applied(torch.from_numpy(x).bfloat16(), as_torch, POSITIONS, LLAMA)["measured"][
        "dtypes"
    ] == {"before": "bfloat16", "after": "bfloat16"}
    with pytest.raises(AssertionError, match="base_mismatch: the frequencies fit base 500000"):
        assert_rope_applied(x, turned, POSITIONS, d_model=64, base=10000.0)
    with pytest.raises(AssertionError, match="cannot tell"):
        assert_rope_applied(np.zeros_like(x), np.zeros_like(x), POSITIONS, d_model=64)


def test_positions_given_leave_the_offset_unread_as_the_service_does() -> None:
    """The offset numbers the tokens only without positions (as the service reads it): one that
    would number them past 2^31 − 1 is no error beside them."""
    x = vectors(32, 4, 64)
    turned = exact(RopeParams(d_model=64, base=500000.0), x, POSITIONS)
    assert_rope_applied(x, turned, POSITIONS, LLAMA, layer=2, offset=2**31 - 1)


@pytest.mark.live
def test_url_asks_a_running_service_and_says_the_same(dumps: Path) -> None:
    from tests.live.conftest import start_server, stop_server

    server = start_server({"POSENC_LOG_LEVEL": "warning"})
    try:
        runs: tuple[tuple[str, list[str]], ...] = (("q_rope.npy", []), ("q_base.npy", ["--json"]))
        for after, extra in runs:
            args: list[str | Path] = [
                "applied", dumps / "q.npy", dumps / after, "--positions", dumps / "ids.npy",
                "--config", dumps / "config.json", "--layer", "2", *extra,
            ]  # fmt: skip
            here, there = posenc(*args), posenc(*args, "--url", server.url)
            assert there.code == here.code, there.stderr
            assert there.stdout == here.stdout
        raw = ["--shape", "32,4,64", "--dtype", "bfloat16", "--d-model", "64", "--offset", "5000"]
        there = posenc(
            "applied", dumps / "q.bf16", dumps / "q_rope.bf16", *raw, "--url", server.url
        )
        assert (
            there.stdout == posenc("applied", dumps / "q.bf16", dumps / "q_rope.bf16", *raw).stdout
        )
    finally:
        stop_server(server)
