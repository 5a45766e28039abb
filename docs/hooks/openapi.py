"""The HTTP contract page, rendered from the service's own OpenAPI document (never written
twice): the document is written into the site as openapi.json, which api.md's Swagger UI reads,
and the page's table of operations is made from the same document at build time."""

from __future__ import annotations

import json
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from app.main import create_app

_MARK = "<!-- operations -->"
_document: dict[str, Any] = {}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    _document.update(create_app().openapi())
    files.append(File.generated(config, "openapi.json", content=json.dumps(_document, indent=1)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return markdown.replace(_MARK, operations(_document)) if _MARK in markdown else markdown


def operations(document: dict[str, Any]) -> str:
    """A Markdown table: every operation's method, path and summary, in the document's order."""
    rows = ["| method | path | what it does |", "| --- | --- | --- |"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            summary = (operation.get("summary") or "").replace("|", "\\|")
            rows.append(f"| `{method.upper()}` | `{path}` | {summary} |")
    return "\n".join(rows)
