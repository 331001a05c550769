"""Packaging: one version, declared extras, clean errors for missing optional dependencies."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import highway_transformer
from highway_transformer.errors import MissingExtra
from highway_transformer.extras import EXTRAS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_is_written_once() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "highway_transformer.__version__"
    assert f"## [{highway_transformer.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_licence_file_matches_pyproject() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_every_extra_is_declared_and_heavy_packages_are_optional() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    core = " ".join(PYPROJECT["project"]["dependencies"])
    for heavy in ("matplotlib", "scikit-learn", "tokenizers"):
        assert heavy not in core


def _make_variable(makefile: str, name: str) -> set[str]:
    import re

    found = re.search(rf"^{name} := ([a-z,]+)$", makefile, re.M)
    assert found is not None, name
    return set(found.group(1).split(","))


def _prerequisites(makefile: str, target: str) -> list[str]:
    import re

    found = re.search(rf"^{re.escape(target)}:(.*)$", makefile, re.M)
    assert found is not None, target
    return found.group(1).split()


def test_make_installs_every_extra_but_a_service_and_a_benchmark() -> None:
    """``make test`` installs the extras the tests and docs use: all but ``wandb`` (a
    service with an account) and ``bench`` (one benchmark's comparison package)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert 'pip install -q -e ".[$(FULL_EXTRAS)]"' in makefile
    installed = _make_variable(makefile, "FULL_EXTRAS")
    declared = set(PYPROJECT["project"]["optional-dependencies"])
    assert installed <= declared
    assert declared - installed == {"wandb", "bench"}


def test_make_demo_installs_what_the_demo_needs_alone() -> None:
    """``make demo`` installs torch, the core and ``report`` (the demo's figures: the one
    extra it imports) into its own stamp; ``make test`` and the tools the full install, after
    it."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert _make_variable(makefile, "DEMO_EXTRAS") == {"report"}
    assert 'pip install -q -e ".[$(DEMO_EXTRAS)]"' in makefile
    assert _prerequisites(makefile, "demo") == ["$(DEMO_STAMP)"]
    assert _prerequisites(makefile, "$(DEMO_STAMP)") == ["$(BIN)/python", "pyproject.toml"]
    assert _prerequisites(makefile, "$(STAMP)") == ["$(DEMO_STAMP)"]
    for target in ("install", "test", "test-slow", "docs", "lint", "bench"):
        assert _prerequisites(makefile, target) == ["$(STAMP)"], target


def test_the_demo_runs_with_the_report_extra_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``make demo`` installs is enough: the tiny demo (training, report, figures,
    samples) with every other extra missing."""
    from highway_transformer import cli

    for module, extra in EXTRAS.items():
        if extra != "report":
            monkeypatch.setitem(sys.modules, module, None)
    argv = ["demo", "--tiny", "--steps", "4", "--seeds", "1", "--jobs", "1", "--no-progress"]
    assert cli.main([*argv, "--out", str(tmp_path / "demo")]) == 0
    assert (tmp_path / "demo" / "report.md").is_file()


def test_demo_without_matplotlib_stops_before_training(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from highway_transformer import cli

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["demo", "--out", str(tmp_path / "demo"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "highway-transformer[report]" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "demo").exists()  # nothing was trained


def test_the_core_imports_without_any_extra() -> None:
    import subprocess

    block = "; ".join(f"sys.modules[{m!r}] = None" for m in EXTRAS)
    modules = "highway_transformer, highway_transformer.cli, " \
              "highway_transformer.cli_experiments, highway_transformer.report.report, " \
              "highway_transformer.data.corpora"  # fmt: skip
    code = f"import sys; {block}; import {modules}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]


def test_wandb_without_its_extra_names_it(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from highway_transformer.training.writers import WandbWriter

    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(MissingExtra, match=r"wandb_project='p'.*highway-transformer\[wandb\]"):
        WandbWriter(tmp_path, "p", "run", {})
