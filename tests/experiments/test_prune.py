"""``highway prune``: a finished run's weights go only once nothing needs them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.cli import main
from highway_transformer.experiments.prune import prune

MakeRun = Callable[..., Path]


def _with_weights(run_dir: Path, gate_biases: bool = True) -> Path:
    for name in ("best", "checkpoint", "checkpoints/step-000002"):  # older: keep_checkpoints
        (run_dir / name).mkdir(parents=True)
        (run_dir / name / "model.safetensors").write_bytes(b"\0" * 1000)
    path = run_dir / "results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    if gate_biases:
        results["gate_biases"] = {}
    path.write_text(json.dumps(results), encoding="utf-8")
    return run_dir


def test_only_finished_runs_that_need_nothing_lose_their_weights(
    tmp_path: Path, make_run: MakeRun
) -> None:
    root = tmp_path / "runs"
    done = _with_weights(make_run(root, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 9.0))
    older = _with_weights(
        make_run(root, "ht-table1/t-l3+tanh", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 9.0),
        gate_biases=False,
    )
    training = _with_weights(
        make_run(root, "ht-table1/t-l3+sigmoid", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 9.0)
    )
    (training / "results.json").unlink()
    xl = _with_weights(
        make_run(root, "ht-table5/l6-xl", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 9.0, scale="tiny")
    )
    lines: list[str] = []
    decisions = prune([done, older, training, xl], dry_run=True, log=lines.append)
    assert [d.prunable for d in decisions] == [True, False, False, False]
    assert (done / "best").is_dir() and lines[-1] == ("1 of 4 run(s) pruned: would free 0.0 MiB")
    reasons = {d.run_dir.parent.name: d.keep_reason for d in decisions}
    assert "no gate biases" in reasons["t-l3+tanh"]
    assert "not finished" in reasons["t-l3+sigmoid"]
    assert "not measured yet" in reasons["l6-xl"]  # HT 5: the paper's protocol needs best/

    (xl / "protocol_eval.json").write_text("{}", encoding="utf-8")
    prune([done, older, training, xl], log=lines.append)
    for run in (done, xl):
        assert not (run / "best").exists() and not (run / "checkpoint").exists()
        assert not (run / "checkpoints").exists()
        assert (run / "results.json").is_file() and (run / "metrics.jsonl").is_file()
    for run in (older, training):
        assert (run / "best").is_dir() and (run / "checkpoint").is_dir()
        assert (run / "checkpoints" / "step-000002").is_dir()
    assert lines[-1] == "2 of 4 run(s) pruned: freed 0.0 MiB"


def test_a_run_in_use_keeps_its_weights(tmp_path: Path, make_run: MakeRun) -> None:
    from highway_transformer.training.runlock import own_run_folder

    run = _with_weights(make_run(tmp_path, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 9))
    with own_run_folder(run, resume=True):  # e.g. a finished run resumed to train further
        (decision,) = prune([run], log=lambda line: None)
    assert decision.keep_reason.startswith("in use by PID") and (run / "checkpoint").is_dir()


def test_cli_prunes_a_table_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_run: MakeRun
) -> None:
    run = _with_weights(make_run(tmp_path, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 9))
    assert main(["prune", str(tmp_path / "ht-table1"), "--dry-run"]) == 0
    assert (run / "best").is_dir()
    assert "would drop best, checkpoint, checkpoints" in capsys.readouterr().out
    assert main(["prune", str(tmp_path / "ht-table1")]) == 0
    assert not (run / "best").exists()
    assert main(["prune", str(tmp_path / "nothing-here")]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line that says what to give
