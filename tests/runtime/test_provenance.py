"""runtime/provenance.py: the code a run was trained by (version, source SHA-256, commit)."""

from __future__ import annotations

import shutil
from pathlib import Path

import highway_transformer
from highway_transformer.runtime import provenance
from highway_transformer.runtime.hardware import run_metadata
from highway_transformer.runtime.machine import machine_of


def test_code_facts_name_this_code() -> None:
    facts = provenance.code_facts()
    assert set(facts) == set(provenance.CODE_FACTS)
    assert facts["code_version"] == highway_transformer.__version__
    assert facts["code_sha256"] == provenance.source_sha256()
    assert len(str(facts["code_sha256"])) == 64
    # a checkout names its commit and whether the source has changes; a package, neither
    assert (facts["commit"] is None) == (facts["dirty"] is None)


def test_the_source_hash_changes_with_any_source_file(tmp_path: Path) -> None:
    copy = tmp_path / "highway_transformer"
    shutil.copytree(provenance.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert provenance.source_sha256(copy) == provenance.source_sha256()
    (copy / "nn" / "combiner.py").write_text(
        (copy / "nn" / "combiner.py").read_text(encoding="utf-8") + "\n", encoding="utf-8"
    )
    changed = provenance.source_sha256(copy)
    (copy / "nn" / "combiner.py").rename(copy / "nn" / "combiner2.py")
    assert len({changed, provenance.source_sha256(copy), provenance.source_sha256()}) == 3


def test_a_source_folder_outside_git_has_no_commit(tmp_path: Path) -> None:
    assert provenance._git(tmp_path, "rev-parse", "HEAD") is None


def test_runs_record_the_code_but_a_machine_is_not_the_code() -> None:
    facts = run_metadata("cpu", "fp32")
    assert {k: facts[k] for k in provenance.CODE_FACTS} == provenance.code_facts()
    changed = {**facts, "code_sha256": "0" * 64, "commit": "abc", "dirty": True}
    assert machine_of(changed) == machine_of(facts)  # resumed after a code change: same machine
