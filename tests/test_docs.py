"""The documentation site's generated parts: API reference, configuration keys, benchmark
tables and navigation, checked without building the site (``make test`` builds it with
``mkdocs build --strict`` after the tests)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SRC = ROOT / "src"


def hook(name: str):
    """A hook module of ``docs_hooks/``, imported by path (MkDocs loads them the same way)."""
    path = ROOT / "docs_hooks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mkdocs_config() -> dict:
    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold !!python tags; none are needed here
        pass

    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)


def nav_pages(nav: list) -> list[str]:
    found = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):  # every docs link points at a page
        assert (ROOT / link).is_file(), link


def test_every_page_is_in_the_navigation() -> None:
    listed = set(nav_pages(mkdocs_config()["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.glob("*.md")}
    assert pages <= listed, pages - listed
    assert all((DOCS / page).is_file() for page in listed)


def test_api_reference_has_a_page_per_module() -> None:
    api = hook("api_reference")
    found = api.modules(SRC)
    files = [p for p in (SRC / "highway_transformer").rglob("*.py") if p.name != "__main__.py"]
    assert len(found) == len(files)
    assert "highway_transformer" in found and "highway_transformer.cli" in found
    uris = [api.page_uri(name, path) for name, path in found.items()]
    assert len(set(uris)) == len(uris)
    top = api._nav(found)
    assert nav_pages(top)[0] == "reference/index.md"
    assert sorted(nav_pages(top)[1:]) == sorted(uris)


def test_config_reference_lists_every_key() -> None:
    from highway_transformer.config.keys import format_keys

    config = hook("config_reference")
    rows = config.config_rows(ROOT)
    assert len(rows) == len(format_keys().strip().splitlines())  # every key `highway config` prints
    keys = [key for key, *_ in rows]
    assert "model.gate.kind" in keys and "train.lr" in keys and "data.corpus" in keys
    rendered = config.render(rows)
    assert all(f"| `{key}` |" in rendered for key in keys)
    assert "## `model`" in rendered and "## `train`" in rendered


def test_every_marker_of_a_generated_part_has_its_hook() -> None:
    markers = {
        "<!-- config-keys -->": "config_reference",
        "<!-- cli-help -->": "cli_help",
    }
    hooks = set(mkdocs_config()["hooks"])
    for marker, name in markers.items():
        assert any(marker in p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")), marker
        assert f"docs_hooks/{name}.py" in hooks


def test_benchmark_json_renders_with_the_machine_it_ran_on() -> None:
    bench = hook("benchmark_tables")
    shown = set()
    for page in DOCS.glob("*.md"):
        shown |= set(bench.MARKER.findall(page.read_text(encoding="utf-8")))
    files = sorted((DOCS / "benchmarks").glob("*.json"))
    assert files and {f.stem for f in files} == shown
    for path in files:
        record = bench.load(DOCS, path.stem)
        assert record is not None, path
        assert record["command"].startswith("python benchmarks/")
        assert "--json" not in record["command"]
        assert re.fullmatch(r"[0-9a-f]{40}", record["commit"])
        assert record["tables"] and all(t["rows"] for t in record["tables"])
        text = bench.render(path.stem, record)
        assert record["machine"]["cpu_model"] in text and record["machine"]["torch"] in text


def test_benchmark_record_carries_the_machine_and_command(tmp_path, monkeypatch) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_x.py", "--rounds", "1", "--json", str(out)])
    record = common.Record()
    record.table(["variant", "ms"], [["a", "1.0"]], caption="one")
    record.note("a note")
    record.write(str(out), {"a": 1.0})
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["command"] == "python benchmarks/bench_x.py --rounds 1"
    assert data["tables"][0]["rows"] == [["a", "1.0"]] and data["notes"] == ["a note"]
    assert {"cpu_model", "cpu_capability", "threads", "torch"} <= set(data["machine"])
    assert data["date"].endswith("UTC") and data["results"] == {"a": 1.0}
    bench = hook("benchmark_tables")
    assert "| a | 1.0 |" in bench.render("r", data)
