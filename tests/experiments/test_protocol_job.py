"""The protocol job (``experiments/protocol_job.py``): its command line measures one row, and a
wrong one is a usage line."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer.experiments import protocol_job
from highway_transformer.experiments.registry import Experiment


def test_main_measures_the_named_row_at_its_scale_and_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, str, str]] = []

    def measure(run_dir: str, experiment: Experiment, scale: str, device: str) -> None:
        calls.append((run_dir, experiment.name, scale, device))

    monkeypatch.setattr(protocol_job, "measure_protocol", measure)
    protocol_job.main([str(tmp_path), "ht-table5/l6-xl+tanh", "tiny", "cpu"])
    assert calls == [(str(tmp_path), "ht-table5/l6-xl+tanh", "tiny", "cpu")]


@pytest.mark.parametrize("argv", [[], ["run"], ["run", "ht-table5/l6-xl", "tiny", "cpu", "x"]])
def test_a_wrong_command_line_is_the_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match=r"^usage: python -m .*protocol_job RUN_DIR ROW SCALE"):
        protocol_job.main(argv)
