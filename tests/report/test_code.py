"""report/code.py: a report pairs runs of one recorded code only (``--allow-mixed-code``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.report.code import NOT_RECORDED, run_code, runs_by_code
from highway_transformer.report.report import write_report
from highway_transformer.runtime.provenance import code_facts

#: The code facts of another version of the library (a clean checkout of another commit).
OTHER = {
    "code_version": "0.1.0",
    "code_sha256": "ab" * 32,
    "commit": "1234567890ab",
    "dirty": False,
}


def _results(*codes: dict | None) -> dict:
    """results.json whose stretches recorded ``codes`` (None: a stretch without them)."""
    return {"stretches": [{"from_step": 0, "to_step": 1, **(c or {})} for c in codes]}


def test_a_run_resumed_after_a_code_change_has_two_codes() -> None:
    assert len(run_code(_results(code_facts(), code_facts()))) == 1
    assert len(run_code(_results(code_facts(), OTHER))) == 2
    assert run_code(_results(None)) == {NOT_RECORDED}
    assert run_code({"metadata": OTHER}) == run_code(_results(OTHER))  # older runs: metadata
    assert run_code(None) == {NOT_RECORDED}


def test_one_code_only_when_every_run_recorded_the_same() -> None:
    same = runs_by_code([("a", _results(OTHER)), ("b", {"metadata": OTHER})])
    assert same["one_code"] and list(same["runs_by_code"].values()) == [["a", "b"]]
    assert not runs_by_code([("a", _results(OTHER)), ("b", _results(code_facts()))])["one_code"]
    assert not runs_by_code([("a", _results(None)), ("b", _results(None))])["one_code"]
    described = next(iter(same["runs_by_code"]))
    assert "commit 1234567890" in described and "uncommitted" not in described
    dirty = next(iter(runs_by_code([("a", _results({**OTHER, "dirty": True}))])["runs_by_code"]))
    assert "uncommitted changes" in dirty


def _table(make_run: Callable[..., Path], root: Path, code: dict | None) -> Path:
    """HT Table 1's plain and σ rows, two seeds; seed 2 records ``code`` (None: this code)."""
    for seed, row_code in ((1, None), (2, code)):
        for name, loss in (("ht-table1/t-l3", 1.2 + seed / 10), ("ht-table1/t-l3+sigmoid", 1.1)):
            valid = [loss + 0.3, loss + 0.2, loss + 0.1, loss]
            make_run(root, name, valid, loss / 0.69, loss / 0.7, 10.0, seed=seed, code=row_code)
    return root / "ht-table1"


def test_a_report_of_one_code_says_nothing_about_code(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    report = write_report([_table(make_run, tmp_path / "runs", None)], tmp_path / "report")
    assert report["code"]["one_code"]
    assert "one recorded version of the code" not in (tmp_path / "report" / "index.md").read_text()


@pytest.mark.parametrize("code", [OTHER, {}])
def test_mixed_or_unrecorded_code_is_refused_unless_allowed(
    make_run: Callable[..., Path], tmp_path: Path, code: dict
) -> None:
    table = _table(make_run, tmp_path / "runs", code)
    with pytest.raises(ConfigError, match="--allow-mixed-code") as refused:
        write_report([table], tmp_path / "refused")
    message = str(refused.value)
    assert "\n" not in message and "seed 2" in message
    assert not (tmp_path / "refused").exists()  # nothing written
    report = write_report([table], tmp_path / "report", allow_mixed_code=True)
    assert not report["code"]["one_code"] and len(report["code"]["runs_by_code"]) == 2
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "not all trained by one recorded version of the code" in index
    saved = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert saved["code"] == report["code"]


def test_the_cli_passes_allow_mixed_code(
    make_run: Callable[..., Path],
    tmp_path: Path,
    experiments_cli: Callable[[list[str]], object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from highway_transformer import cli

    table = _table(make_run, tmp_path / "runs", OTHER)
    assert cli.main(["report", str(table), "--out", str(tmp_path / "r")]) == 2
    assert "--allow-mixed-code" in capsys.readouterr().err
    argv = ["report", str(table), "--out", str(tmp_path / "r"), "--allow-mixed-code"]
    args = experiments_cli(argv)
    assert args.func(args) == 0  # type: ignore[attr-defined]
