"""What llama.cpp's own files say of each architecture, read mechanically for
``test_llama_cpp_source``: the name a GGUF holds, ``llama_model_rope_type``'s answer, the class
``llama_model_mapping`` builds and the files holding its ``load_arch_hparams`` and its graph
(``models.h``'s inheritance and ``using graph = …``), and the conditions guarding its rope calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

_ROPE_CALL = re.compile(r"ggml_rope(?:_ext|_multi)?\(")


def _function(text: str, signature: str) -> str:
    """The body of the first function whose text starts with ``signature``, up to the first
    closing brace at the start of a line."""
    body = text[text.index(signature) :]
    return body[: body.index("\n}\n")]


@dataclass(frozen=True)
class Struct:
    base: str | None
    hparams: bool
    graph_of: str | None  # using graph = X::graph
    own_graph: bool


class Source:
    """The files of ``vendor/llama.cpp/src``."""

    def __init__(self, src: Path) -> None:
        self.src = src

    def text(self, name: str) -> str:
        return (self.src / name).read_text()

    @cached_property
    def names(self) -> dict[str, str]:
        """The name a GGUF's general.architecture holds → ``LLM_ARCH_X``'s X."""
        pairs = re.findall(r'\{ LLM_ARCH_(\w+),\s*"([^"]+)"\s*\}', self.text("llama-arch.cpp"))
        return {name: enum for enum, name in pairs}

    @cached_property
    def rope_types(self) -> dict[str, str]:
        """``llama_model_rope_type``'s answer per ``LLM_ARCH_X``: norm, neox, mrope, imrope,
        none, or "depends" where it reads the file (a condition before its return)."""
        body = _function(self.text("llama-model.cpp"), "llama_rope_type llama_model_rope_type")
        types: dict[str, str] = {}
        pending: list[str] = []
        conditional = False
        for line in body.splitlines():
            case = re.match(r"\s*case LLM_ARCH_(\w+):", line)
            if case:
                conditional = conditional and bool(pending)
                pending.append(case.group(1))
            elif "if (" in line or "?" in line:
                conditional = True
            if "return" in line and pending:
                plain = re.search(r"return LLAMA_ROPE_TYPE_(\w+);", line)
                for enum in pending:
                    types[enum] = plain.group(1).lower() if plain and not conditional else "depends"
                pending, conditional = [], False
        return types

    @cached_property
    def roped(self) -> set[str]:
        enums = {enum: name for name, enum in self.names.items()}
        return {enums[e] for e, kind in self.rope_types.items() if kind != "none" and e in enums}

    @cached_property
    def classes(self) -> dict[str, str]:
        """``LLM_ARCH_X`` → the class ``llama_model_mapping`` builds for it."""
        body = _function(self.text("llama-model.cpp"), "static llama_model * llama_model_mapping")
        found: dict[str, str] = {}
        pending: list[str] = []
        for line in body.splitlines():
            case = re.match(r"\s*case LLM_ARCH_(\w+):", line)
            if case:
                pending.append(case.group(1))
            made = re.search(r"new (llama_model_\w+)", line)
            if made:
                found.update(dict.fromkeys(pending, made.group(1)))
                pending = []
        return found

    @cached_property
    def structs(self) -> dict[str, Struct]:
        text = self.text("models/models.h")
        found = {}
        for match in re.finditer(r"^struct (llama_model_\w+) : public (\w+) \{(.*?)^\};", text,
                                 re.M | re.S):  # fmt: skip
            name, base, body = match.groups()
            using = re.search(r"using graph = (llama_model_\w+)::graph", body)
            found[name] = Struct(
                base=base
                if base.startswith("llama_model_") and base != "llama_model_base"
                else None,
                hparams="void load_arch_hparams" in body,
                graph_of=using.group(1) if using else None,
                own_graph=re.search(r"^\s*struct graph\b", body, re.M) is not None,
            )
        return found

    def build_arch_graph(self, cls: str) -> str:
        """The text of ``cls::build_arch_graph`` (its own or its base's)."""
        struct = self.structs[cls]
        try:
            path = self._defining(rf"\b{cls}::build_arch_graph\(")
        except LookupError:
            assert struct.base is not None, cls
            return self.build_arch_graph(struct.base)
        return _function(
            self.text(path), f"std::unique_ptr<llm_graph_context> {cls}::build_arch_graph"
        )

    def _defining(self, pattern: str) -> str:
        """The models/ file whose text matches ``pattern``."""
        for path in sorted((self.src / "models").glob("*.cpp")):
            if re.search(pattern, path.read_text()):
                return f"models/{path.name}"
        raise LookupError(pattern)

    def hparams_file(self, cls: str) -> str:
        """The file of the ``load_arch_hparams`` class ``cls`` runs (its own or its base's)."""
        struct = self.structs[cls]
        if struct.hparams or struct.base is None:
            return self._defining(rf"\b{cls}::load_arch_hparams\(")
        return self.hparams_file(struct.base)

    def graph_file(self, cls: str) -> str:
        """The file of the graph constructor class ``cls`` builds."""
        struct = self.structs[cls]
        if struct.graph_of is not None:
            return self.graph_file(struct.graph_of)
        if struct.own_graph or struct.base is None:
            return self._defining(rf"\b{cls}::graph(?:<[^>]*>)?::graph\(")
        return self.graph_file(struct.base)

    @staticmethod
    def guards(graph: str) -> list[list[str]]:
        """For each rope call, the conditions of the ``if`` blocks enclosing it, innermost
        first (``!(…)`` for an ``else`` block), with the booleans they name expanded once
        (``use_rope`` → its definition)."""
        booleans = dict(re.findall(r"(?:const )?bool\s+(\w+)\s*=\s*([^;]+);", graph))
        found = []
        lines = graph.splitlines()
        for index, line in enumerate(lines):
            if not _ROPE_CALL.search(line):
                continue
            conditions: list[str] = []
            depth, negate = 0, False
            for at in range(index - 1, -1, -1):
                previous = lines[at]
                if depth == 0 and re.match(r"\s*\}\s*else\s*\{", previous):
                    negate = True
                    continue
                depth += previous.count("}") - previous.count("{")
                if depth < 0:
                    # a condition may start a line or two above its brace
                    opening = " ".join(text.strip() for text in lines[max(0, at - 2) : at + 1])
                    condition = re.search(r"if\s*(?:constexpr\s*)?\(([^{]*)\)\s*\{$", opening)
                    if condition:
                        text = condition.group(1)
                        for name, value in booleans.items():
                            text = re.sub(rf"\b{name}\b", f"({value})", text)
                        conditions.append(f"!({text})" if negate else text)
                    depth, negate = 0, False
            found.append(conditions)
        return found
