"""``highway run --plan``'s time estimate: rates measured on this kind of machine only."""

from __future__ import annotations

import json
from pathlib import Path

from highway_transformer.experiments.estimate import (
    estimate_line,
    finish_time,
    machine_here,
    recorded_stretches,
    seconds_per_step,
)
from highway_transformer.runtime.machine import ran_here
from highway_transformer.storage.folder import write_manifest

AVX2 = {"device": "cpu", "cpu_capability": "AVX2", "threads": 1, "precision": "fp32"}
AVX512 = {**AVX2, "cpu_capability": "AVX512"}


def stretch(start: int, end: int, seconds: float, machine: dict) -> dict:
    return {"from_step": start, "to_step": end, "seconds": seconds, "host": "h", **machine}


def test_a_stretch_ran_here_when_every_speed_fact_it_records_agrees() -> None:
    here = {**AVX512, "cpu_model": "AMD EPYC", "host": "other"}
    assert ran_here(stretch(0, 10, 1.0, AVX512), here)  # written before cpu_model was recorded
    assert not ran_here(stretch(0, 10, 1.0, AVX2), here)
    assert not ran_here(stretch(0, 10, 1.0, {**AVX512, "threads": 2}), here)
    assert not ran_here({"from_step": 0, "to_step": 10, "seconds": 1.0, "recorded": False}, here)
    assert not ran_here({"from_step": 0, "to_step": 10, "seconds": 1.0}, here)  # no facts


def write_checkpoint_state(folder: Path, stretches: list[dict]) -> None:
    """The JSON half of a checkpoint, as the trainer writes it (with its manifest)."""
    run = {"elapsed": 1.0, "items": 1, "best_valid": 1.0, "best_step": 1, "stretches": stretches}
    parts = ("task", "optimizer", "schedule", "scaler", "rng")
    state = {"step": 100, "run": run, **{part: {} for part in parts}}
    (folder / "config.json").write_text("{}")
    (folder / "trainer.json").write_text(json.dumps(state))
    write_manifest(folder)


def test_a_checkpoint_that_is_not_a_valid_trainer_state_gives_no_rate(tmp_path: Path) -> None:
    (tmp_path / "checkpoint").mkdir()
    write_checkpoint_state(tmp_path / "checkpoint", [stretch(0, 100, 40.0, AVX512)])
    assert len(recorded_stretches(tmp_path)) == 1
    (tmp_path / "checkpoint" / "trainer.json").write_text('{"run": {"stretches": []}}')
    assert recorded_stretches(tmp_path) == []  # damaged or half-written: skipped, no error


def test_seconds_per_step_reads_results_then_checkpoints(tmp_path: Path) -> None:
    done, going, empty = tmp_path / "done", tmp_path / "going", tmp_path / "empty"
    (going / "checkpoint").mkdir(parents=True)
    done.mkdir()
    empty.mkdir()
    # finished: 100 steps on AVX2 (not here), then 300 steps in 60 s here
    stretches = [stretch(0, 100, 50.0, AVX2), stretch(100, 400, 60.0, AVX512)]
    (done / "results.json").write_text(json.dumps({"stretches": stretches}))
    # in progress: 100 steps in 40 s here, in its checkpoint
    write_checkpoint_state(going / "checkpoint", [stretch(0, 100, 40.0, AVX512)])
    assert len(recorded_stretches(done)) == 2 and recorded_stretches(empty) == []
    assert seconds_per_step([done, going, empty], AVX512) == (60.0 + 40.0) / (300 + 100)
    assert seconds_per_step([done], AVX2) == 0.5
    assert seconds_per_step([empty], AVX512) is None


def test_estimate_line_counts_measured_rows_and_names_the_others() -> None:
    left = [("plain", 1000), ("sdu", 2000), ("tanh", 500), ("done", 0)]
    rates = {"plain": 0.18, "sdu": 0.9, "tanh": None, "done": 1.0}
    # 1000 * 0.18 + 2000 * 0.9 = 1980 s = 33 min; at 2 at once the sdu run alone takes 30 min
    assert estimate_line(left, rates, 2, 1) == (
        "at the rates measured on this kind of machine (1 thread per run): ≈ 33 min of "
        "training, ≈ 30 min with 2 at once; not yet measured here, so not counted (--probe N): "
        "tanh"
    )
    assert estimate_line([("a", 36_000)], {"a": 1.0}, 1, 2) == (
        "at the rates measured on this kind of machine (2 threads per run): ≈ 10.0 h of training"
    )
    assert estimate_line([("a", 10)], {"a": None}, 1, 1).endswith(
        "no time estimate (--probe N measures N steps of each row here)"
    )
    assert estimate_line([("a", 10)], {"a": 0.5}, 1, 1, probed=(20, ["a"])).endswith(
        "≈ 5 s of training; probed here for 20 steps, not whole runs: a"
    )
    assert estimate_line([("a", 0)], {"a": None}, 1, 1) == "nothing left to train"


def test_finish_time_schedules_runs_in_order_on_free_slots() -> None:
    assert finish_time([10.0, 10.0, 30.0], 2) == 40.0  # the third waits for a free slot
    assert finish_time([30.0, 10.0, 10.0], 2) == 30.0  # the short ones share the other slot
    assert finish_time([17.0, 38.0], 2) == 38.0  # not (17 + 38) / 2
    assert finish_time([5.0, 5.0, 5.0], 1) == 15.0 and finish_time([4.0], 3) == 4.0


def test_machine_here_is_what_a_run_records() -> None:
    here = machine_here("cpu", "fp32", 3)
    assert here["device"] == "cpu" and here["threads"] == 3 and here["precision"] == "fp32"
    assert here["compiled"] is False  # train.compile=auto: eager on the CPU
    assert machine_here("cpu", "fp32", 3, "true")["compiled"] is True
    assert "cpu_capability" in here and "cpu_model" in here
