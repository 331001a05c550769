"""A report's verdicts (``report/primary.py``): the registered comparison only, with how it
was registered and where each run's value comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer.experiments.comparisons import registered_comparison
from highway_transformer.report.primary import (
    CONFLICTING,
    PARTLY,
    PRE_REGISTERED,
    RETROSPECTIVE,
    UNREGISTERED,
    frozen_status,
    primary_comparison,
    verdict,
)
from highway_transformer.report.report import write_report
from highway_transformer.report.runs import group_runs, load_run

PLAIN, SIGMOID = "ht-table1/t-l3", "ht-table1/t-l3+sigmoid"
FROZEN = {**registered_comparison("ht-table1").to_json(), "registered_with": {"commit": "abc"}}


def _table(tmp_path: Path, make_run, comparison=FROZEN, final=True, gap=0.1) -> list[Path]:
    """Plain and sigma over three seeds; sigma's last-checkpoint bpc ``gap`` lower."""
    dirs = []
    for seed, noise in ((1, 0.0), (2, 0.01), (3, -0.01)):
        for name, shift in ((PLAIN, 0.0), (SIGMOID, -gap)):
            value = 2.0 + noise + shift
            dirs.append(
                make_run(tmp_path, name, [3.0, 2.5, 2.0, 1.5], 1.0, 1.0, 10.0, seed=seed,
                         comparison=comparison, final_bpc=value if final else None)
            )  # fmt: skip
    return dirs


def _primary(dirs: list[Path]) -> dict:
    return primary_comparison(group_runs([load_run(d) for d in dirs]), "ht-table1")


def test_pre_registered_verdict_reads_the_last_checkpoint_whole_split(
    tmp_path: Path, make_run
) -> None:
    primary = _primary(_table(tmp_path, make_run))
    assert primary["status"] == PRE_REGISTERED
    assert "abc" in primary["note"]
    (row,) = [r for r in primary["rows"] if r["row"] == SIGMOID]
    assert row["paired"]["per_seed"] == pytest.approx({"1": -0.1, "2": -0.1, "3": -0.1})
    assert row["sources"] == ["last, whole split"]
    assert row["verdict"] == "better: the paper's direction"  # the paper: -8.5%


def test_runs_without_a_frozen_comparison_are_labelled_retrospective(
    tmp_path: Path, make_run
) -> None:
    """Older runs: the registry's comparison, applied to the last periodic validation."""
    primary = _primary(_table(tmp_path, make_run, comparison=None, final=False))
    assert primary["status"] == RETROSPECTIVE
    assert "not pre-registered" in primary["note"]
    (row,) = [r for r in primary["rows"] if r["row"] == SIGMOID]
    assert row["sources"] == ["last, periodic validation (whole split)"]
    # both rows logged the same validation curve: nothing to tell apart
    assert row["paired"]["per_seed"] == {"1": 0.0, "2": 0.0, "3": 0.0}
    assert row["verdict"] == "no detectable difference (the paper: better)"


def test_mixed_and_conflicting_registrations(tmp_path: Path, make_run) -> None:
    dirs = _table(tmp_path / "a", make_run)
    dirs += [make_run(tmp_path / "a", PLAIN, [3.0, 2.5, 2.0, 1.5], 1.0, 1.0, 10.0, seed=4)]
    assert _primary(dirs)["status"] == PARTLY
    other = {**FROZEN, "fingerprint": "0" * 16}
    dirs = _table(tmp_path / "b", make_run)
    dirs += [make_run(tmp_path / "b", PLAIN, [3.0, 2.5, 2.0, 1.5], 1.0, 1.0, 10.0, seed=4,
                      comparison=other)]  # fmt: skip
    conflicting = _primary(dirs)
    assert conflicting["status"] == CONFLICTING and conflicting["rows"] == []
    assert "no verdict" in conflicting["note"]


def test_every_commit_that_froze_the_comparison_is_named(tmp_path: Path, make_run) -> None:
    """Runs started from different commits froze the same comparison: the note names each
    commit with its number of runs, not the first run's alone."""
    dirs = _table(tmp_path, make_run)
    later = {**FROZEN, "registered_with": {"commit": "def"}}
    dirs += [make_run(tmp_path, PLAIN, [3.0, 2.5, 2.0, 1.5], 1.0, 1.0, 10.0, seed=4,
                      comparison=later)]  # fmt: skip
    primary = _primary(dirs)
    assert primary["status"] == PRE_REGISTERED
    assert (
        "registered by 2 commits, the same comparison at each: abc (6 runs), def (1 run)"
        in (primary["note"])
    )


def test_runs_of_an_unregistered_table_that_froze_nothing_get_no_verdict() -> None:
    """A table no registry knows (``highway ab``) has only the comparison its runs froze."""
    from highway_transformer.report.runs import RunRecord

    runs = [RunRecord(Path("x"), {"name": "ab/plain", "table": "ab"})]
    status = frozen_status(runs, "ab")
    assert status["status"] == UNREGISTERED and status["comparison"] is None
    assert "no verdict" in status["note"]


def test_verdict_words() -> None:
    resolved = {"verdict": "lower"}
    assert verdict(resolved, -8.5, "bpc") == "better: the paper's direction"
    assert verdict(resolved, +6.5, "ppl") == "better: opposite to the paper"
    assert verdict({"verdict": "higher"}, None, "bpc") == "worse"
    assert verdict({"verdict": "lower"}, None, "accuracy") == "worse"
    assert verdict({"verdict": "unresolved"}, -4.8, "ppl") == (
        "no detectable difference (the paper: better)"
    )
    assert verdict({"verdict": None}, None, "bpc").startswith("no verdict")
    assert verdict(None, None, "bpc").startswith("no verdict")


def test_report_puts_the_verdicts_first_and_labels_the_rest_exploratory(
    tmp_path: Path, make_run
) -> None:
    report = write_report(_table(tmp_path / "runs", make_run), tmp_path / "out")
    index = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert report["primary"]["status"] == PRE_REGISTERED
    verdicts = index.index("## Verdicts: the registered comparison")
    assert verdicts < index.index("## Results (paper format, exploratory)")
    assert "**better: the paper's direction**" in index
    assert "## Seeds and paired differences (exploratory)" in index
