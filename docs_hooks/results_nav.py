"""MkDocs hook: every report under ``docs/results/`` in the navigation, found at build time.

``highway report`` writes a report folder (``index.md`` with its figures) per table; each one
is added to the "Results" section of the navigation, titled by its folder's name (the page
itself says which table and scale), so a new report needs no edit of ``mkdocs.yml``.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig

SECTION = "Results"
FOLDER = "results"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    reports = sorted(Path(config.docs_dir, FOLDER).glob("*/index.md"))
    entries = [{p.parent.name: f"{FOLDER}/{p.parent.name}/index.md"} for p in reports]
    for item in config.nav or []:
        if isinstance(item, dict) and SECTION in item and isinstance(item[SECTION], list):
            item[SECTION].extend(entries)
    return config
