"""MkDocs hook: every ``highway`` command's options, from its own ``--help``, at build time.

The page ``cli.md`` holds the marker below; it is replaced by ``highway --help`` and then
``highway COMMAND --help`` for each command that lists, run in one subprocess through
``highway_transformer.cli.main`` (the installed ``highway`` entry point) for the source tree
being documented.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

MARKER = "<!-- cli-help -->"

#: Runs in the subprocess: the top-level help, then each command's, as JSON.
SCRIPT = r"""
import contextlib, io, json, re
from highway_transformer.cli import main

def help_of(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main([*argv, "--help"])
        except SystemExit:
            pass
    return out.getvalue()

top = help_of([])
choices = re.search(r"\{([\w,-]+)\}", top)
commands = choices.group(1).split(",") if choices else []
print(json.dumps({"": top, **{c: help_of([c]) for c in commands}}))
"""


def helps(root: Path) -> dict[str, str]:
    env = dict(os.environ, COLUMNS="100")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "src"), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode:
        raise PluginError(f"highway --help failed: {done.stderr[-500:]}")
    found = json.loads(done.stdout)
    if len(found) < 2:
        raise PluginError("highway --help lists no commands")
    return found


def render(found: dict[str, str]) -> str:
    out = []
    for command, text in found.items():
        out.append(f"### `highway {command}`" if command else "### `highway`")
        out += ["", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: object) -> str:
    if MARKER not in markdown:
        return markdown
    root = Path(config.config_file_path).resolve().parent
    return markdown.replace(MARKER, render(helps(root)))
