"""Arrows only go down: the package's modules form layers, and every import (one inside a
function included) points to the same package or a lower layer, with no circle anywhere.

The layers are those of ``docs/architecture.md``; an import under ``if TYPE_CHECKING:``
never runs and is not counted. A new module belongs to the layer of its package; a new
top-level module must be placed in :data:`LAYERS`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "highway_transformer"
ROOT = "highway_transformer"

#: Bottom to top; the names of a layer are top-level modules or packages of ROOT ("" is the
#: package itself: the version and the lazily imported public names).
LAYERS: list[tuple[str, ...]] = [
    ("", "errors"),
    ("extras", "files"),
    ("config",),
    ("presets",),
    ("storage",),
    ("runtime",),
    ("nn",),
    ("data",),
    ("models",),
    ("tasks",),
    ("validation",),
    ("training", "api"),
    ("experiments", "hf"),
    ("report",),
    ("cli_experiments",),
    ("cli",),
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


class _Imports(ast.NodeVisitor):
    """Every ``import`` / ``from ... import`` of a module, wherever it stands."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str | None, list[str]]] = []

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(0, alias.name, []) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append((node.level, node.module, [a.name for a in node.names]))


def _module_name(path: Path) -> str:
    parts = [ROOT, *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for level, module, names in visitor.found:
            base = ".".join(package[: len(package) - level + 1] if level else [])
            target = ".".join(p for p in (base, module or "") if p) if level else module or ""
            for candidate in [f"{target}.{n}" for n in names] + [target]:
                if candidate in files and candidate != name:
                    graph[name].add(candidate)
                    break
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_sees_lazy_imports() -> None:
    graph = import_graph()
    # cli imports the trainer inside a function: the edge is counted all the same
    assert f"{ROOT}.training.trainer" in graph[f"{ROOT}.cli"]
    assert len(graph) > 100


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_every_module_has_a_layer() -> None:
    unplaced = sorted({_group(m) for m in import_graph()} - set(LAYER_OF))
    assert unplaced == [], f"place these in LAYERS: {unplaced}"


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports from one package to another at the same or a higher layer."""
    return [
        (source, target)
        for source, targets in sorted(graph.items())
        for target in sorted(targets)
        if _group(source) != _group(target) and LAYER_OF[_group(target)] >= LAYER_OF[_group(source)]
    ]


def test_arrows_only_go_down() -> None:
    assert upward_imports(import_graph()) == []


@pytest.mark.parametrize(
    ("lower", "upper"),
    [("config", "validation"), ("models", "training"), ("storage", "data"), ("nn", "nn")],
)
def test_a_planted_upward_import_or_circle_is_found(lower: str, upper: str) -> None:
    """The checks are not vacuous: an arrow planted upwards (or within a package, back to
    the module importing it) is reported."""
    graph = import_graph()
    if lower == upper:  # a circle inside nn: block -> attention -> block
        graph[f"{ROOT}.nn.attention"].add(f"{ROOT}.nn.block")
        assert [f"{ROOT}.nn.attention", f"{ROOT}.nn.block"] in circles(graph)
        return
    source = f"{ROOT}.{lower}"
    graph[source].add(f"{ROOT}.{upper}")
    assert (source, f"{ROOT}.{upper}") in upward_imports(graph)


def test_every_package_folder_is_a_regular_package() -> None:
    """A folder of modules without ``__init__.py`` would be left out of the wheel."""
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").is_file()) == []


def test_the_architecture_page_lists_these_layers() -> None:
    page = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = page.split("<!-- layers:", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    listed = [tuple(re.split(r"\s{2,}", line)[0].split()) for line in block.splitlines()]
    assert listed == [tuple(name for name in layer if name) for layer in LAYERS]
