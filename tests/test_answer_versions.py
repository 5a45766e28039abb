"""The version says when answers changed, and CHANGELOG.md says which (tests/answers.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import posenc
from app import provenance
from app.responses import etag_for
from tests import answers
from tests.conftest import Client

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


@pytest.fixture(scope="module")
def measured() -> dict[str, str]:
    return answers.digests(Client())


def test_the_answers_recorded_are_this_versions(measured: dict[str, str]) -> None:
    manifest = answers.recorded()
    if manifest["system"] != provenance.system():
        pytest.skip(f"answers recorded on {manifest['system']}, this is {provenance.system()}")
    assert manifest["version"] == posenc.__version__, (
        f"tests/answers.json records {manifest['version']}'s answers, posenc is "
        f"{posenc.__version__}: run python -m tests.answers"
    )
    moved = answers.changed(measured, manifest["answers"])
    assert not moved, (
        f"{len(moved)} of {len(measured)} sampled answers are not the bytes recorded for "
        f"{posenc.__version__}: bump posenc.__version__, say in CHANGELOG.md which answers "
        f"changed, then run python -m tests.answers. Changed: {moved[:5]}"
    )


def test_the_sample_reaches_every_scheme_format_and_recipe(measured: dict[str, str]) -> None:
    urls = list(measured)
    for scheme in posenc.SCHEMES:
        assert any(url.startswith(f"/v1/{scheme.name}/table?") for url in urls), scheme.name
    for fmt in answers.FORMATS:
        assert any(f"format={fmt}" in url for url in urls), fmt
    for recipe in ("framework", "ggml", "mlx"):
        assert any("/v1/rope/table?" in url and f"recipe={recipe}" in url for url in urls)
    assert sum("/verify?" in url for url in urls) > 2 * len(posenc.SCHEMES)


def test_the_changelog_says_what_this_version_changed() -> None:
    text = CHANGELOG.read_text()
    headings = re.findall(r"^## (\S+)", text, flags=re.MULTILINE)
    assert headings and headings[0] == posenc.__version__, "CHANGELOG.md: newest entry first"
    entry = text.split(f"## {posenc.__version__}", 1)[1].split("\n## ", 1)[0]
    assert "answers" in entry.lower() and entry.count("\n- ") >= 1, entry


def test_a_tag_names_the_code_that_made_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    canonical = {"scheme": "rope", "params": {"d_model": 8}}
    before = etag_for("/v1/rope/table", canonical, "json")
    monkeypatch.setattr(provenance, "digest", lambda: "another build")
    assert etag_for("/v1/rope/table", canonical, "json") != before


def test_the_digest_covers_every_module_of_the_core_and_the_web_layer() -> None:
    names = {name for name, _ in provenance._sources()}
    root = Path(__file__).resolve().parents[1]
    on_disk = {
        path.relative_to(root).as_posix()
        for package in ("posenc", "app")
        for path in (root / package).rglob("*.py")
    }
    assert names == on_disk


def test_recording_other_bytes_under_a_recorded_version_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, measured: dict[str, str]
) -> None:
    manifest = tmp_path / "answers.json"
    committed = answers.MANIFEST.read_bytes()
    manifest.write_bytes(committed)
    monkeypatch.setattr(answers, "MANIFEST", manifest)
    one = next(iter(measured))
    monkeypatch.setattr(answers, "digests", lambda client: {**measured, one: "other bytes"})
    with pytest.raises(SystemExit, match=r"bump posenc\.__version__"):
        answers.record()
    assert manifest.read_bytes() == committed
