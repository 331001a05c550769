"""MkDocs hook: links from a page to a file of the repository outside ``docs/``.

Pages such as the results reports link to run folders (``../../results/README.md``) that are
not part of the site. In the site such a link becomes its text followed by the file's path
in the repository as code, so the source files keep links that work when browsing the
repository and the site has no broken ones.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.pages import Page

LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _rewrite(text: str, page_dir: str, docs: Path, root: Path) -> str:
    def replace(match: re.Match) -> str:
        label, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
            return match.group(0)
        path = (docs / posixpath.normpath(posixpath.join(page_dir, target))).resolve()
        if path.is_relative_to(docs) or not path.is_relative_to(root):
            return match.group(0)
        where = path.relative_to(root).as_posix()
        return f"{label} (`{where}` in the repository)"

    return LINK.sub(replace, text)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: object) -> str:
    docs = Path(config.docs_dir).resolve()
    root = Path(config.config_file_path).resolve().parent
    page_dir = posixpath.dirname(page.file.src_uri)
    parts = re.split(r"(^```.*?^```[ \t]*$)", markdown, flags=re.M | re.S)
    return "".join(
        part if part.startswith("```") else _rewrite(part, page_dir, docs, root) for part in parts
    )
