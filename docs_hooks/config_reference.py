"""MkDocs hook: the configuration reference, generated from the config schema at build time.

The page ``config.md`` holds the marker below; it is replaced by one table per config section
with every key, its default, what it allows (its declared range or choices) and its meaning
(with its source): the keys ``highway config`` prints, as ``config/schema.py`` declares them
(:func:`highway_transformer.config.keys.declared_keys`), read from the source tree being
documented.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.pages import Page

MARKER = "<!-- config-keys -->"


def config_rows(root: Path) -> list[tuple[str, str, str, str]]:
    """``(key, default, allowed, meaning)`` of every config key, for the code under
    ``root/src``."""
    sys.path.insert(0, str(root / "src"))
    try:
        from highway_transformer.config.keys import choices_of, declared_keys
    finally:
        sys.path.pop(0)
    rows = []
    for name, default, spec in declared_keys():
        allowed = meaning = ""
        if spec is not None:
            listed = r" \| ".join(f"`{c}`" if c else '`""`' for c in choices_of(spec))
            allowed = spec.range.describe() if spec.range else listed
            meaning = spec.meaning + (f" (source: {spec.source})" if spec.source else "")
        rows.append((name, "None" if default is None else repr(default), allowed, meaning))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(rows: list[tuple[str, str, str, str]]) -> str:
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in rows:
        section = row[0].split(".")[0] if "." in row[0] else "run"
        sections.setdefault(section, []).append(row)
    out = []
    for section, keys in sections.items():
        title = "Run name and source" if section == "run" else f"`{section}`"
        out += [
            f"## {title}",
            "",
            "| key | default | allowed | meaning |",
            "| --- | --- | --- | --- |",
        ]
        out += [f"| `{k}` | `{_cell(d)}` | {a} | {_cell(m)} |" for k, d, a, m in keys]
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: object) -> str:
    if MARKER not in markdown:
        return markdown
    root = Path(config.config_file_path).resolve().parent
    return markdown.replace(MARKER, render(config_rows(root)))
