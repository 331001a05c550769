"""The verdicts table of several reports (``report/summary.py``), and the one in
``docs/results/README.md``, which must be the committed reports' own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.report.report import write_report
from highway_transformer.report.summary import (
    END,
    START,
    generated_block,
    main,
    read_report,
    summary_markdown,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def test_summary_lists_each_registered_pair_with_its_verdict(tmp_path: Path, make_run) -> None:
    from highway_transformer.experiments.comparisons import registered_comparison

    frozen = registered_comparison("ht-table1").to_json()
    for seed, noise in ((1, 0.0), (2, 0.01), (3, -0.01)):
        for name, shift in (("ht-table1/t-l3", 0.0), ("ht-table1/t-l3+tanh", -0.1)):
            make_run(tmp_path / "runs", name, [3.0, 2.5, 2.0, 1.5], 1.0, 1.0, 10.0, seed=seed,
                     comparison=frozen, final_bpc=2.0 + noise + shift)  # fmt: skip
    write_report([tmp_path / "runs"], tmp_path / "ht1")
    text = summary_markdown([tmp_path / "ht1" / "report.json"])
    assert text.startswith(START) and text.endswith(END)
    (row,) = [line for line in text.splitlines() if "t-l3+tanh against t-l3" in line]
    assert "(pre-registered)" in text
    assert "-0.1000 [-0.1000, -0.1000] bpc" in row
    assert "| 3/3 |" in row and "better: the paper's direction" in row


def test_unreadable_or_old_reports_are_refused(tmp_path: Path, capsys) -> None:
    old = tmp_path / "report.json"
    old.write_text(json.dumps({"metric": "bpc"}))
    with pytest.raises(ConfigError, match="write it again"):
        read_report(old)
    with pytest.raises(ConfigError, match="cannot read"):
        read_report(tmp_path / "missing.json")
    assert main([str(old)]) == 2
    assert "error:" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="markers"):
        generated_block("no table here")


def test_the_results_page_holds_the_committed_reports_verdicts() -> None:
    reports = sorted(p for p in RESULTS.glob("*/report.json") if "primary" in p.read_text())
    if not reports:
        pytest.skip("no committed report with a registered comparison")
    page = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert generated_block(page) == summary_markdown(reports), (
        "docs/results/README.md's verdicts differ from the reports: regenerate them with "
        "python -m highway_transformer.report.summary "
        "$(grep -l '\"primary\"' docs/results/*/report.json)"
    )
