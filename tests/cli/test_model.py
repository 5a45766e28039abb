"""`posenc model config.json`: the config operation's answer, in a terminal or as JSON, and the
two commands that build and check the model's cache — which work as printed. The text is held
to a golden set (tests/cli/golden/: one config and its expected output each; after a deliberate
change, regenerate with `posenc model NAME.json > NAME.txt` inside that folder)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from app import settings as settings_module
from app.settings import Settings
from posenc.cli import main
from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.registry import get
from tests.cli.conftest import LLAMA3, posenc

GOLDEN = Path(__file__).with_name("golden")
CONFIGS = sorted(path.stem for path in GOLDEN.glob("*.json"))


def model_text(name: str, *extra: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(GOLDEN)  # the printed check names the config as given
    ran = CliRunner().invoke(main, ["model", f"{name}.json", *extra], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    return ran.stdout


@pytest.mark.parametrize("name", CONFIGS)
def test_the_text_is_the_golden_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert model_text(name, monkeypatch=monkeypatch) == (GOLDEN / f"{name}.txt").read_text()


def test_the_golden_set_holds_one_rope_per_layer_type_nope_layers_and_multimodal() -> None:
    texts = {name: (GOLDEN / f"{name}.txt").read_text() for name in CONFIGS}
    assert any("rope2  " in text for text in texts.values())
    assert any("\nno rope  layers " in text for text in texts.values())
    assert any("\nmrope  section=" in text for text in texts.values())


def test_llama_3_1_is_answered_in_under_15_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = model_text("llama3_1_8b", monkeypatch=monkeypatch).splitlines()
    assert len(lines) < 15
    assert lines[1] == "rope  layers 0-31"
    assert not any("/v1/" in line for line in lines)


def test_urls_come_with_urls_and_never_the_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    text = model_text("llama3_1_8b", "--urls", monkeypatch=monkeypatch)
    urls = [line.split()[1] for line in text.splitlines() if "/v1/" in line]
    assert [url.split("?")[0] for url in urls] == [
        "/v1/rope/table",
        "/v1/rope/table",
        "/v1/rope/verify",
    ]


def test_the_text_names_every_parameter_of_the_rope(llama3: Path) -> None:
    ran = posenc("model", llama3)
    assert ran.code == 0, ran.stderr
    params = ran.stdout.splitlines()[2].split()
    for pair in [
        "d_model=128",
        "base=500000",
        "scaling=llama3",
        "factor=8",
        "original_max_position_embeddings=8192",
    ]:
        assert pair in params
    assert "max_position_embeddings 2048" in ran.stdout.splitlines()[0]


def test_json_is_the_config_operations_answer(llama3: Path) -> None:
    ran = posenc("model", llama3, "--json")
    (extra,) = [e for e in get("rope").extras if e.name == "config"]
    expected = json.loads(json.dumps(extra.handle(LLAMA3, SERVICE_DEFAULTS)))
    assert json.loads(ran.stdout) == expected
    assert expected["params"]["scaling"] == "llama3"


def test_the_printed_commands_build_a_cache_that_passes_its_check(
    llama3: Path, tmp_path: Path
) -> None:
    printed = posenc("model", llama3).stdout.splitlines()
    (build,) = (shlex.split(line)[2:] for line in printed if line.startswith("  build  "))
    (check,) = (shlex.split(line)[2:] for line in printed if line.startswith("  check  "))
    assert build[:2] == ["table", "rope"] and check[0] == "check"
    built = posenc(*build, cwd=tmp_path)
    assert built.code == 0, built.stderr
    checked = posenc(*check, cwd=tmp_path)
    assert checked.code == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({**LLAMA3, "rope_scaling": {"rope_type": "spiral"}}, "rope_scaling.rope_type: must be"),
        ({"hidden_size": 4096}, "num_attention_heads"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_a_config_the_service_cannot_honour_is_exit_2_naming_the_field(
    config: object, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ran = posenc("model", path)
    assert ran.code == 2 and message in ran.stderr, ran.stderr
    assert ran.stderr.count("\n") == 1 and ran.stdout == ""


def test_a_file_that_is_not_json_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    ran = posenc("model", path)
    assert ran.code == 2 and "not a readable JSON file" in ran.stderr


def test_the_limits_of_a_default_service_are_the_settings_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fields = Settings.model_fields
    assert SERVICE_DEFAULTS.max_values == fields["max_elements"].default
    assert SERVICE_DEFAULTS.max_work == fields["max_work"].default
    # The memory budget of a service where no container limit is set.
    monkeypatch.setattr(settings_module, "memory_limit", lambda: None)
    monkeypatch.delenv("POSENC_MEMORY_BYTES", raising=False)
    assert SERVICE_DEFAULTS.max_bytes == Settings().memory_bytes


def test_each_rope_of_a_per_layer_model_builds_and_passes_its_printed_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    printed = model_text("gemma3_1b", monkeypatch=monkeypatch).splitlines()
    monkeypatch.chdir(tmp_path)
    builds = [shlex.split(line)[2:] for line in printed if line.startswith("  build  ")]
    checks = [shlex.split(line)[2:] for line in printed if line.startswith("  check  ")]
    assert len(builds) == len(checks) == 2
    for build, check in zip(builds, checks, strict=True):
        short = [*build[: build.index("--seq-len")], "--seq-len", "256", *build[-2:]]
        assert CliRunner().invoke(main, short).exit_code == 0
        checked = CliRunner().invoke(main, check)
        assert checked.exit_code == 0 and "value_rounding" in checked.stdout, checked.output
