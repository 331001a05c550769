"""MkDocs hook: the configuration reference, generated from ``highway config`` at build time.

The page ``config.md`` holds the marker below; it is replaced by one table per config section
with every key, its default and its meaning, as ``python -m highway_transformer.cli config``
prints them for the source tree being documented (run in a subprocess: the command line is
the stable interface, wherever the function behind it lives).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

MARKER = "<!-- config-keys -->"


def config_output(root: Path) -> str:
    """What ``highway config`` prints, for the code under ``root/src``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "src"), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "highway_transformer.cli", "config"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode or not done.stdout.strip():
        raise PluginError(f"`highway config` failed ({done.returncode}): {done.stderr[-500:]}")
    return done.stdout


def parse(text: str) -> list[tuple[str, str, str]]:
    """``(key, default, meaning)`` rows of ``highway config``'s aligned columns."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = re.split(r" {2,}", line.strip(), maxsplit=2)
        if len(parts) < 2:
            raise PluginError(f"unexpected `highway config` line: {line!r}")
        rows.append((parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(rows: list[tuple[str, str, str]]) -> str:
    sections: dict[str, list[tuple[str, str, str]]] = {}
    for row in rows:
        section = row[0].split(".")[0] if "." in row[0] else "run"
        sections.setdefault(section, []).append(row)
    out = []
    for section, keys in sections.items():
        title = "Run name and source" if section == "run" else f"`{section}`"
        out += [f"## {title}", "", "| key | default | meaning |", "| --- | --- | --- |"]
        out += [f"| `{k}` | `{_cell(d)}` | {_cell(m)} |" for k, d, m in keys]
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: object) -> str:
    if MARKER not in markdown:
        return markdown
    root = Path(config.config_file_path).resolve().parent
    return markdown.replace(MARKER, render(parse(config_output(root))))
