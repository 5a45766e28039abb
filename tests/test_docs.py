"""The documentation holds only what the code does: the site (mkdocs.yml, docs/) builds
strictly — a broken link, anchor or nav entry fails — and every example on its pages and in the
README runs here, its shown output compared with what it prints.

What runs, page by page in a fresh folder, in the page's order:
- a block with a ``title="name"`` (```` ```json title="config.json" ````) is a file the page's
  examples use: written into the folder as shown;
- a ``console`` block is a session: each ``$ command`` runs and what follows it, up to the next
  ``$``, is its output (doctest's rules: ``...`` matches anything, whitespace is normalised;
  output that parses as JSON is compared as JSON). ``curl`` asks the ASGI app in process (no
  network), ``posenc`` runs through click's runner, and ``| jq .path`` picks a member;
- a ``python`` block runs (the page's blocks share one namespace, as in a doctest), with httpx's
  ``get`` and ``post`` sent to the ASGI app; a ``test_*`` function it defines is called, and a
  ``text`` block titled ``output`` right after it is what it must print.
Other blocks (``sh``, ``yaml``, ``js``, ``text``) are shown, not run: a ``curl`` or ``posenc``
line in a ``sh`` block fails here, so no runnable example can hide from the run.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from app.settings import Settings
from posenc.cli import main
from tests.conftest import Client
from tests.gguf.files import llama_31_prefix
from tests.onnx.graphs import smollm2_folder

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("console", "python")

_FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_TITLE = re.compile(r'title="([^"]+)"')


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    line: int


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks at the left margin, in order (an indented fence is shown, not
    run: runnable examples stay at the margin, which a test holds)."""
    text = page.read_text()
    found = []
    for match in _FENCE.finditer(text):
        title = _TITLE.search(match[2])
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(match[1], title and title[1], match[3], line))
    return found


def session(body: str) -> list[tuple[str, str]]:
    """A console block's commands (lines joined after a ``\\`` or inside quotes) and the output
    shown after each."""
    steps: list[tuple[str, list[str]]] = []
    lines = iter(body.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") or not _closed(command):
                joint = " " if command.endswith("\\") else "\n"
                command = command.removesuffix("\\") + joint + next(lines).strip()
            steps.append((command, []))
        else:
            assert steps, f"output before any command: {line!r}"
            steps[-1][1].append(line)
    return [(command, "\n".join(shown)) for command, shown in steps]


def _closed(command: str) -> bool:
    """Every quote closed: a quoted argument may run over lines, as in a shell."""
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


def curl(args: list[str], folder: Path, client: Client) -> str:
    """What ``curl ARGS`` prints, asked of the app in process: the options the pages use."""
    method, url, data, out = None, None, None, None
    headers: dict[str, str] = {}
    given = iter(args)
    for arg in given:
        if arg in ("-s", "-sS", "--silent"):
            continue
        if arg in ("-X", "--request"):
            method = next(given)
        elif arg in ("-H", "--header"):
            name, value = next(given).split(":", 1)
            headers[name.strip()] = value.strip()
        elif arg in ("-d", "--data", "--data-binary"):
            value = next(given)
            content = (folder / value[1:]).read_bytes() if value.startswith("@") else value.encode()
            # curl's -d drops a file's line breaks; --data-binary sends it as it is.
            keep = arg == "--data-binary"
            data = content if keep else content.replace(b"\r", b"").replace(b"\n", b"")
        elif arg in ("-o", "--output"):
            out = next(given)
        else:
            assert not arg.startswith("-"), f"curl option {arg} is not one this runner knows"
            url = arg if "://" in arg else f"http://{arg}"
    assert url is not None, "curl without a URL"
    if data is not None:
        headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
    parts = urllib.parse.urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    answer = client.request(method or ("POST" if data is not None else "GET"), target,
                            content=data, headers=headers)  # fmt: skip
    if out is not None:
        assert answer.is_success, f"{target}: {answer.status_code} {answer.text}"
        (folder / out).write_bytes(answer.content)
        return ""
    return answer.text


def jq(path: str, text: str) -> str:
    """``jq PATH`` for the paths the pages use: ``.``, ``.name`` and ``[index]`` steps."""
    value: Any = json.loads(text)
    for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", path):
        value = value[name] if name else value[int(index)]
    return json.dumps(value, indent=2) + "\n"


def run(command: str, folder: Path, client: Client, monkeypatch: pytest.MonkeyPatch) -> str:
    stages = [shlex.split(stage) for stage in command.split(" | ")]
    program, *args = stages[0]
    if program == "curl":
        printed = curl(args, folder, client)
    elif program == "posenc":
        monkeypatch.chdir(folder)
        printed = CliRunner().invoke(main, args, catch_exceptions=False).output
    else:
        raise AssertionError(f"{program}: the runner runs curl and posenc only")
    for stage in stages[1:]:
        assert stage[0] == "jq" and len(stage) == 2, f"{stage}: only `| jq PATH` is understood"
        printed = jq(stage[1], printed)
    return printed


def same(shown: str, printed: str) -> bool:
    """The output a page shows against the output printed, as doctest reads it, or as JSON."""
    if not shown.strip():
        return not printed.strip()
    with contextlib.suppress(ValueError):
        return bool(json.loads(shown) == json.loads(printed))
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    return doctest.OutputChecker().check_output(shown + "\n", printed, flags)


@pytest.fixture(scope="module")
def client() -> Client:
    # The access log writes to stdout, where a Python example's printed output is read.
    return Client(Settings(log_level="warning"))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_example_on_the_page_runs_as_shown(
    page: Path, tmp_path: Path, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    for method in ("get", "post"):
        monkeypatch.setattr(httpx, method, getattr(client, method))
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    # The one file the pages name and cannot show: a GGUF's first bytes (Llama 3.1 8B's header
    # and rope_freqs tensor, as llama.cpp's converter writes them).
    (tmp_path / "model.gguf").write_bytes(llama_31_prefix())
    # And an ONNX Runtime GenAI model's folder (SmolLM2-135M's graph, its caches in external
    # data, without weights), as the GenAI builder writes it.
    smollm2_folder(tmp_path / "onnx-out")
    found = blocks(page)
    for number, block in enumerate(found):
        where = f"{page.name}:{block.line}"
        if block.title is not None and block.title != "output":
            (tmp_path / block.title).write_text(block.body)
        if block.lang == "console":
            for command, shown in session(block.body):
                printed = run(command, tmp_path, client, monkeypatch)
                assert same(shown, printed), f"{where}: $ {command}\n{printed}"
        elif block.lang == "python":
            monkeypatch.chdir(tmp_path)
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                exec(compile(block.body, where, "exec"), namespace)
                for name, test in list(namespace.items()):
                    if name.startswith("test_") and callable(test):
                        test()
                        del namespace[name]
            after = found[number + 1] if number + 1 < len(found) else None
            shown = after.body if after is not None and after.title == "output" else ""
            assert same(shown, output.getvalue()), f"{where}:\n{output.getvalue()}"
        elif block.lang == "sh":
            lines = block.body.splitlines()
            hidden = [line for line in lines if line.startswith(("curl", "posenc"))]
            assert not hidden, f"{where}: an example in a sh block is not run; make it console"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_runnable_examples_are_at_the_margin(page: Path) -> None:
    indented = re.findall(r"^[ \t]+```(?:console|python)", page.read_text(), re.M)
    assert not indented, f"{page.name}: an indented example would not be run"


def test_the_readmes_links_lead_to_files_that_exist() -> None:
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs is installed by the docs extra (make install)"
    built = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    document = json.loads((tmp_path / "site" / "openapi.json").read_text())
    assert document == json.loads(json.dumps(Client().app.openapi()))
    assert "<swagger-ui" not in (tmp_path / "site" / "api.html").read_text()  # replaced
    loads = re.compile(r"<(?:script|link|img|iframe)[^>]*(?:src|href)=\"(?:https?:)?//[^\"]*")
    outside = [found for page in (tmp_path / "site").glob("*.html")
               for found in loads.findall(page.read_text())]  # fmt: skip
    assert outside == [], "the site loads from another host"


def _number(text: str) -> float:
    """``0.036``, ``2.3·10^7`` or ``2.9·10^-8`` as the README writes them."""
    mantissa, _, exponent = text.partition("·10^")
    return float(mantissa) * 10.0 ** int(exponent or 0)


def _two_digits(value: float) -> float:
    return float(f"{value:.2g}")


def test_the_readmes_table_of_errors_at_a_million_is_measured(client: Client) -> None:
    """The README's first table: each recipe's Llama 3 table at position 10^6, sent back to
    verify, whose largest error and ulps the README states to two digits."""
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| [^|]*\(`recipe=(\w+)`[^|]*\| ([^ |]+) \| ([^ |]+) \|$", readme, re.M)
    assert [recipe for recipe, _, _ in rows] == ["framework", "ggml", "mlx", "exact"]
    query = "d_model=128&base=500000&offset=1000000"
    for recipe, error, ulps in rows:
        table = client.get(f"/v1/rope/table?{query}&seq_len=1&recipe={recipe}&format=npy")
        report = client.post(
            f"/v1/rope/verify?{query}",
            content=table.content,
            headers={"Content-Type": "application/x-npy"},
        ).json()
        assert _two_digits(report["max_abs_error"]) == pytest.approx(_number(error)), recipe
        assert _two_digits(report["max_ulp_error"]) == pytest.approx(_number(ulps)), recipe
