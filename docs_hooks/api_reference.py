"""MkDocs hook: the API reference, one page per module, found in the source tree at build time.

Walks ``src/highway_transformer/**/*.py`` (reading files, importing nothing: mkdocstrings
reads the source statically too), writes ``reference/<module path>.md`` holding
``::: <module>`` for each, an overview page with each module's first docstring line, and
appends an "API reference" section to the navigation. A module that is added, moved or
renamed appears, under its new name, without editing this file or ``mkdocs.yml``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PACKAGE = "highway_transformer"
SECTION = "API reference"
FOLDER = "reference"


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def modules(src: Path) -> dict[str, Path]:
    """Dotted module name -> its source file, for every module and package of the package."""
    found: dict[str, Path] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not all((src / Path(*parts[:i])).joinpath("__init__.py").is_file()
                   for i in range(1, len(parts))):  # fmt: skip
            continue  # a script in a folder that is not a package
        found[".".join(parts)] = path
    return dict(sorted(found.items()))


def page_uri(name: str, path: Path) -> str:
    """``reference/a/b.md`` for module ``a.b``; ``reference/a/b/index.md`` for package ``a.b``."""
    tail = "/index.md" if path.name == "__init__.py" else ".md"
    return f"{FOLDER}/{name.replace('.', '/')}{tail}"


def summary(path: Path) -> str:
    """The first line of a module's docstring (empty where it has none)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except SyntaxError:
        return ""
    return (doc or "").strip().split("\n\n")[0].replace("\n", " ")


def _nav(found: dict[str, Path]) -> list:
    """Nested navigation: a section per package holding its own page, then its members."""
    sections: dict[str, list] = {}
    top: list = [{"Overview": f"{FOLDER}/index.md"}]
    for name, path in found.items():
        parent = name.rpartition(".")[0]
        is_package = path.name == "__init__.py"
        entry: object
        if is_package:
            entry = {name: [{name: page_uri(name, path)}]}
            sections[name] = entry[name]
        else:
            entry = {name.rpartition(".")[2]: page_uri(name, path)}
        (sections.get(parent, top)).append(entry)
    return top


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    found = modules(_root(config) / "src")
    config.nav = [*(config.nav or []), {SECTION: _nav(found)}]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    found = modules(_root(config) / "src")
    rows = [
        f"| [`{name}`]({page_uri(name, path)[len(FOLDER) + 1 :]}) | "
        f"{summary(path).replace('|', '/')} |"
        for name, path in found.items()
    ]
    overview = "\n".join([
        "# API reference",
        "",
        "Generated when the site is built: one page per module of `src/highway_transformer`, "
        "from its docstrings (each object's source is one click away). The",
        "[Python API guide](../python-api.md) shows how the pieces are used together.",
        "",
        "| module | what it holds |",
        "| --- | --- |",
        *rows,
        "",
    ])  # fmt: skip
    files.append(File.generated(config, f"{FOLDER}/index.md", content=overview))
    for name, path in found.items():
        content = f"::: {name}\n"
        files.append(File.generated(config, page_uri(name, path), content=content))
    return files
