"""The shape of the house (issue 21): schemes and shared numerics as rooms, imports flowing one way.

Read off the source, not the running modules: an import graph of ``posenc`` from each module's
explicit imports, the registry's own text, and the HTTP layer's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from posenc.registry import SCHEMES

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "posenc"
# A module longer than this says why at its top, in its docstring.
LONGEST = 400
REASON = "Why one module:"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(CORE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The posenc modules ``name`` imports explicitly (``from a import b`` is ``a.b`` when that is
    a module, else ``a``); a package's implicit import of its parent is not an edge."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in known else base)
    return {module for module in found if module in known and module != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_module_of_the_core_takes_part_in_an_import_cycle() -> None:
    graph = _graph()
    assert "posenc.schemes.rope" in graph["posenc.registry"]  # the graph sees real edges
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_the_shared_numerics_import_no_scheme() -> None:
    graph = _graph()
    numerics = {name for name in graph if name.startswith("posenc.numerics")}
    shared = numerics | {"posenc.verify", "posenc.conformance", "posenc.cost", "posenc.checks"}
    offending = {
        (name, target)
        for name in shared
        for target in graph[name]
        if target.startswith("posenc.schemes") or target == "posenc.registry"
    }
    assert not offending


def test_each_scheme_lives_in_its_own_package() -> None:
    packages = {path.parent.name for path in (CORE / "schemes").glob("*/__init__.py")}
    homes = {scheme.params.__module__.split(".")[2] for scheme in SCHEMES}
    assert homes == packages
    flat = {path.stem for path in CORE.glob("*.py")}
    assert not flat & packages, "a scheme's module left beside the packages"


def test_the_registry_is_the_tuple_of_declarations_and_nothing_else() -> None:
    text = (CORE / "registry.py").read_text()
    tree = ast.parse(text)
    (entries,) = (
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "SCHEMES"
    )
    assert isinstance(entries, ast.Tuple)
    assert all(isinstance(entry, ast.Attribute) for entry in entries.elts)
    assert len(entries.elts) == len(SCHEMES)
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert functions == {"by_name", "get"}, "adapters belong to the schemes' declarations"
    # Scheme names appear in its imports and its entries only.
    lines = [
        line
        for line in text.splitlines()
        if not line.startswith("from posenc.schemes import")
        and not re.match(r"    \w+\.\w+,$", line)
    ]
    named = {s.name for s in SCHEMES} | {p.name for p in (CORE / "schemes").iterdir()}
    assert not {word for word in named if re.search(rf"\b{word}\b", "\n".join(lines))}


def test_the_http_layer_names_no_scheme() -> None:
    # Names that are not also ordinary words ("index", "binary", "grid" are used as words).
    names = {"sinusoidal", "rope", "alibi", "t5", "sinusoidal2d", "sinusoidal3d", "baselines"}
    assert names <= {s.name for s in SCHEMES} | {p.name for p in (CORE / "schemes").iterdir()}
    found = {
        (str(path.relative_to(ROOT)), word)
        for path in (ROOT / "app").rglob("*.py")
        for word in names
        if re.search(rf"\b{word}\b", path.read_text(), re.IGNORECASE)
        or re.search(r"posenc\.schemes", path.read_text())
    }
    assert not found


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_long_module_says_why_it_is_long(path: Path) -> None:
    text = path.read_text()
    if text.count("\n") > LONGEST:
        docstring = ast.get_docstring(ast.parse(text)) or ""
        assert REASON in docstring, f"{text.count(chr(10))} lines and no '{REASON}' at its top"
