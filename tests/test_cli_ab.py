"""``highway ab``: a baseline and a variant over three seeds, planned, interrupted, resumed,
reported under the comparison frozen before they trained; bad requests refused in one line."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from highway_transformer import cli
from highway_transformer.config import Config, save_config
from highway_transformer.experiments.ab import plan_ab


def _fingerprints(root: Path) -> set[str]:
    return {
        json.loads(p.read_text())["comparison"]["fingerprint"]
        for p in root.rglob("experiment.json")
    }


def test_ab_plans_resumes_and_reports_the_registered_verdict(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text_file: Path,
    tiny_lm_config: Callable[..., Config],
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
) -> None:
    config = tmp_path / "tiny.yaml"
    save_config(tiny_lm_config(text_file, **{"train.max_steps": 6, "train.eval_interval": 3}),
                config)  # fmt: skip
    out = tmp_path / "out"
    rows = [f"plain={config} model.gate.kind=none", f"sdu={config}"]
    argv = ["ab", "--row", rows[0], "--row", rows[1], "--out", str(out), "--no-progress"]

    assert cli.main([*argv, "--plan"]) == 0  # says what would run, trains nothing
    assert "6 to start: 36 steps to train" in capsys.readouterr().out
    assert not out.exists()

    with monkeypatch.context() as patch:  # stopped right after the first checkpoint
        interrupt_after_step(patch, 3)
        assert cli.main(argv) == 130
    assert cli.main([*argv, "--plan"]) == 0
    assert "ab/plain seed 1 (" in (planned := capsys.readouterr().out)
    assert "resumes from its checkpoint at step 3 of 6" in planned
    assert cli.main(argv) == 0  # resumes it, trains the rest, writes the report
    printed = capsys.readouterr().out

    runs = out / "ab" / "none"
    registered = plan_ab(rows, out).comparison.to_json()["fingerprint"]
    assert len(list(runs.rglob("experiment.json"))) == 6
    assert _fingerprints(runs) == {registered}  # frozen into every run before it trained

    def final(row: str, seed: int) -> float:
        results = json.loads((runs / row / f"seed{seed}" / "results.json").read_text())
        return results["final"]["valid"]["bpc"]

    plain = {s: final("plain", s) for s in (1, 2, 3)}
    sdu = {s: final("sdu", s) for s in (1, 2, 3)}
    report = json.loads((out / "report" / "none" / "report.json").read_text())
    assert report["primary"]["status"] == "pre-registered" and report["paper"] is False
    (row,) = report["primary"]["rows"]
    assert row["row_per_seed"] == {str(s): v for s, v in sdu.items()}
    assert row["against_per_seed"] == {str(s): v for s, v in plain.items()}
    diffs = np.array([sdu[s] - plain[s] for s in (1, 2, 3)])
    half = stats.t.ppf(0.975, 2) * diffs.std(ddof=1) / math.sqrt(3)
    low, high = diffs.mean() - half, diffs.mean() + half
    assert row["paired"]["mean"] == pytest.approx(diffs.mean())
    assert row["paired"]["interval"] == pytest.approx([low, high])
    expected = "no detectable difference" if low <= 0 <= high else "better" if high < 0 else "worse"
    # Six steps of a tiny model learn nothing the trivial models do not hold: the interval is
    # kept, the verdict withheld, and the printout says why first.
    assert not any(r["check"]["learned"] for r in report["learning"])
    assert row["verdict_if_learned"] == expected
    assert row["verdict"].startswith("withheld: plain seeds 1, 2, 3 and sdu seeds 1, 2, 3 (")
    assert "did not beat the trigram model" in row["verdict"]
    assert printed.splitlines()[0].startswith("warning: plain seed 1 did not learn beyond")
    assert "bpc against the trigram model's" in printed.splitlines()[0]
    line = next(x for x in printed.splitlines() if x.startswith("sdu − plain: valid bpc "))
    assert line.endswith(f"(3 seeds): {row['verdict']}")
    assert "lines to beat (valid bpc of trivial models): unigram" in printed
    assert f"report: {out / 'report' / 'none' / 'index.md'}" in printed
    index = (out / "report" / "none" / "index.md").read_text(encoding="utf-8")
    assert index.startswith("# ab: plain (baseline), sdu — scale `none`")
    assert "paper" not in index.split("## Convergence")[0].replace("Δ", "")
    learning = index.index("## Did every run learn?")
    assert learning < index.index("## Verdicts") and learning < index.index("| claim |")
    assert f"**{row['verdict']}**" in index  # the verdict cell

    # Another A/B in the same folder (other rows: another comparison) is refused, untouched.
    third = f"tanh={config} model.gate.activation=tanh"
    assert cli.main([*argv, "--row", third]) == 2
    assert "froze the comparison" in capsys.readouterr().err
    assert _fingerprints(runs) == {registered} and not (runs / "tanh").exists()

    # One seed: the finished runs are reused; no interval, no verdict.
    assert cli.main([*argv, "--seeds", "1"]) == 0
    printed = capsys.readouterr().out
    assert "one seed: no interval and no verdict" in printed
    assert "(1 seed): no verdict (fewer than two paired seeds)" in printed


def test_ab_refuses_rows_that_compare_different_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["ab", "--row", "plain=copy/transformer", "--row", "add=adding/transformer"]
    assert cli.main([*argv, "--out", str(out), "--scale", "tiny"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "would mix them" in err
    same = ["ab", "--row", "plain=copy/transformer", "--row", "again=copy/transformer"]
    assert cli.main([*same, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "same configuration as the baseline plain" in err and "quote" not in err
    assert not out.exists()


def test_identical_rows_with_overrides_outside_any_row_ask_to_quote_the_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    # as the shell passes `--row sig=copy/transformer model.gate.kind=sdu`, unquoted
    argv = ["ab", "--row", "plain=copy/transformer", "--row", "sig=copy/transformer"]
    argv += ["model.gate.kind=sdu", "--device", "cpu", "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "same configuration as the baseline plain" in err
    assert "quote the row as one argument: --row 'sig=copy/transformer model.gate.kind=sdu'" in err
    assert "train.device" not in err  # --device's override is no row's own
    assert not out.exists()
